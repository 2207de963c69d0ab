//===- GPUDecoderTest.cpp - the GPU backend against the CPU backend -------===//
//
// Label "gpu": on the real model, the GPU backend's dense prefill and decode
// steps (CUDA graph replays) give the CPU backend's logits (float32 KV on
// both), for one sequence and for a batch of sequences of different prompt
// lengths decoded together through the page pool (with a fork); a sparse
// schedule runs and reports statistics; a synthetic Gemma 3 against the
// float64 forward; bfloat16 weights against float32 ones. Skips, saying
// why, without a GPU or the model.
//
//===----------------------------------------------------------------------===//
#include "ModelTestSupport.h"
#include "SyntheticModel.h"

#include "condensate/Compiler/Compiler.h"
#include "condensate/Cuda/Driver.h"
#include "condensate/Decoder/Decoder.h"
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

/// Why the GPU tests cannot run here, or "" when they can.
std::string gpuSkipReason() {
  auto drv = cuda::Driver::get();
  if (!drv.ok())
    return "no CUDA driver: " + drv.message();
  if ((*drv)->deviceCount() == 0)
    return "no CUDA device";
  return "";
}
std::string skipReason() {
  if (std::string why = gpuSkipReason(); !why.empty())
    return why;
  if (modelPath().empty())
    return modelSkipMessage();
  return "";
}

// Gemma 3's block on the GPU (the GeGLU and embedding-scale kernels, QK-norm
// and post-norms through the rmsnorm kernel, per-layer RoPE bases, window
// policies on local layers in prefill and decode) on random weights of
// Gemma-3-270M's attention shape (head_dim 256, 4 query heads over 1 KV
// head), its matrices Q8_0 blocks held quantised (the GPU dequantises them
// on upload): prefill and dense decode steps against the float64 forward,
// and against the CPU decoder.
TEST(GPUDecoder, Gemma3SyntheticMatchesReference) {
  if (std::string why = gpuSkipReason(); !why.empty())
    GTEST_SKIP() << why;
  using namespace condensate::decoder::testsupport;
  TinySpec s;
  s.arch = "gemma3";
  s.layers = 6;
  s.hidden = 128;
  s.qHeads = 4;
  s.kvHeads = 1;
  s.keyLength = 256;
  s.ffn = 192;
  s.vocab = 300;
  s.slidingWindow = 48;
  s.theta = 1e6;
  s.q8 = true;
  TensorMap tensors = tinyTensors(s, 11);
  auto w = loadTiny(s, tensors, WeightStorage::Quantized);
  ASSERT_TRUE(w);
  const std::vector<int32_t> ids = randomTokens(200, s.vocab, 4);
  const int64_t T = int64_t(ids.size()), V = s.vocab, split = 150;
  const std::vector<double> ref = naiveForward(s, tensors, ids);
  Schedule dense = Schedule::uniform(s.layers, Policy::makeDense());
  auto run = [&](BackendKind kind, std::vector<float> &logits) {
    DecoderOptions o;
    o.backend = kind;
    o.pageSize = 64;
    o.maxTokens = 512;
    o.prefillChunk = 64;
    auto dec = Decoder::create(w, dense, o);
    ASSERT_TRUE(dec.ok()) << dec.message();
    auto seq = (*dec)->newSequence();
    std::vector<float> all, steps;
    // Prefill the first `split` positions, decode the rest step by step.
    ASSERT_TRUE((*dec)->prefill(seq, ids.data(), split, nullptr, &all).ok());
    ASSERT_TRUE(
        (*dec)->teacherForce(seq, ids.data() + split, T - split, steps).ok());
    logits = all;
    logits.insert(logits.end(), steps.begin(), steps.end());
  };
  std::vector<float> gpu, cpu;
  run(BackendKind::GPU, gpu);
  run(BackendKind::CPU, cpu);
  ASSERT_EQ(gpu.size(), size_t(T * V));
  ASSERT_EQ(cpu.size(), size_t(T * V));
  std::vector<float> reff(ref.begin(), ref.end());
  const double vsRef = maxRelative(gpu, reff), vsCpu = maxRelative(gpu, cpu);
  std::printf("Gemma 3 synthetic, %lld positions: max |gpu - float64| / max "
              "= %.2e, |gpu - cpu| = %.2e\n",
              (long long)T, vsRef, vsCpu);
  EXPECT_LT(vsRef, 1e-4);
  EXPECT_LT(vsCpu, 1e-4);
}

// WeightType::BF16 against F32 on the GPU, for a synthetic Llama with a
// tied output (the embedding table kept float32 for the lookup, a bfloat16
// copy for the logits) and one with its own output matrix and Q8_0 blocks
// (dequantised, then rounded): 100 prompt positions prefilled in chunks of
// 64 rows and 60 teacher-forced decode steps (graph replays), every
// position's logits. The float32 run matches the float64 forward (1e-4,
// as elsewhere). bfloat16 keeps 8 significant bits, a relative rounding
// error of up to 2^-9 per weight and per input element; through 4 layers
// the logits move by about 1.6e-2. naiveForward with both operands of
// every product rounded so gives, on these two models, a relative L2 of
// 1.6e-2 over the run, 3.4e-2 at worst for one position and top-1 on 160
// and 158 of 160 positions (over 20 other seeds: at most 1.9e-2, 7.1e-2,
// and 94%). The bounds, 5e-2 over the run, 0.15 per position and top-1 on
// 90% of positions, leave 2.5x or more; a zero, garbage or transposed
// product is off by about 1. The run must also differ from the float32
// one (> 1e-3), or the bfloat16 path did not run.
TEST(GPUDecoder, BF16WeightsStayCloseToF32) {
  if (std::string why = gpuSkipReason(); !why.empty())
    GTEST_SKIP() << why;
  using namespace condensate::decoder::testsupport;
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "llama, tied output, float32 weights"
                      : "qwen2 (q/k/v biases), output matrix, Q8_0 weights");
    TinySpec s;
    s.layers = 4;
    s.hidden = 128;
    s.qHeads = 4;
    s.kvHeads = 2;
    s.ffn = 256;
    s.vocab = 300;
    s.tied = tied;
    s.q8 = !tied;
    // Qwen2's biases: the q/k/v one is added by the split (split_rope).
    if (!tied) {
      s.arch = "qwen2";
      s.bias = true;
    }
    TensorMap tensors = tinyTensors(s, 21);
    auto w = loadTiny(s, tensors,
                      tied ? WeightStorage::Float32 : WeightStorage::Quantized);
    ASSERT_TRUE(w);
    const std::vector<int32_t> ids = randomTokens(160, s.vocab, 9);
    const int64_t T = int64_t(ids.size()), V = s.vocab, split = 100;
    Schedule dense = Schedule::uniform(s.layers, Policy::makeDense());
    WeightFootprint footprint[2];
    std::vector<float> logits[2];
    for (WeightType type : {WeightType::F32, WeightType::BF16}) {
      DecoderOptions o;
      o.backend = BackendKind::GPU;
      o.weightType = type;
      o.kvType = KVType::F32;
      o.pageSize = 64;
      o.maxTokens = 512;
      o.prefillChunk = 64;
      auto dec = Decoder::create(w, dense, o);
      ASSERT_TRUE(dec.ok()) << dec.message();
      EXPECT_NE((*dec)->deviceDescription().find(std::string("weights ") +
                                                 weightTypeName(type)),
                std::string::npos)
          << (*dec)->deviceDescription();
      auto seq = (*dec)->newSequence();
      std::vector<float> all, steps;
      ASSERT_TRUE((*dec)->prefill(seq, ids.data(), split, nullptr, &all).ok());
      ASSERT_TRUE(
          (*dec)->teacherForce(seq, ids.data() + split, T - split, steps).ok());
      all.insert(all.end(), steps.begin(), steps.end());
      ASSERT_EQ(all.size(), size_t(T * V));
      logits[int(type)] = std::move(all);
      footprint[int(type)] = (*dec)->weightFootprint();
    }
    const std::vector<float> &f32 = logits[0], &bf16 = logits[1];
    const std::vector<double> ref = naiveForward(s, tensors, ids);
    EXPECT_LT(maxRelative(f32, std::vector<float>(ref.begin(), ref.end())),
              1e-4);

    double num = 0, den = 0, worstRow = 0;
    int64_t agree = 0;
    for (int64_t p = 0; p < T; ++p) {
      double rn = 0, rd = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double a = f32[size_t(p * V + v)], b = bf16[size_t(p * V + v)];
        ASSERT_TRUE(std::isfinite(b)) << "position " << p;
        rn += (b - a) * (b - a);
        rd += a * a;
      }
      num += rn;
      den += rd;
      worstRow = std::max(worstRow, std::sqrt(rn / rd));
      agree += argmax(f32.data() + p * V, V) == argmax(bf16.data() + p * V, V);
    }
    const double rel = std::sqrt(num / den);
    std::printf("bf16 against f32 weights (%s), %lld positions: relative L2 "
                "%.2e over the run, %.2e at worst; top-1 agrees on "
                "%lld\n",
                tied ? "llama, tied" : "qwen2, Q8_0, untied", (long long)T, rel,
                worstRow, (long long)agree);
    EXPECT_LT(rel, 5e-2);
    EXPECT_GT(rel, 1e-3);
    EXPECT_LT(worstRow, 0.15);
    EXPECT_GE(agree, T * 9 / 10);

    // A step reads the matrices in half the bytes (norms stay float32);
    // the float32 table the lookup reads is held either way.
    const double ratio =
        double(footprint[1].stepBytes) / double(footprint[0].stepBytes);
    EXPECT_GT(ratio, 0.49);
    EXPECT_LT(ratio, 0.51);
    EXPECT_LT(footprint[1].heldBytes, footprint[0].heldBytes);
  }
}

// The fallback memory on the GPU (a layer sent to dense attention runs the
// dense program's kernels inside the captured step; the step is captured
// once a plan): the same decisions and statistics as on the CPU, logits
// within float32 rounding of the CPU's and of the GPU run without it.
TEST(GPUDecoder, FallbackMemoryMatchesCPU) {
  if (std::string why = gpuSkipReason(); !why.empty())
    GTEST_SKIP() << why;
  using namespace condensate::decoder::testsupport;
  TinySpec s;
  s.layers = 3;
  TensorMap tensors = tinyTensors(s, 31);
  auto w = loadTiny(s, tensors);
  ASSERT_TRUE(w);
  auto schedule = parseSchedule(kFallbackMemorySchedule, s.layers, "test");
  ASSERT_TRUE(schedule.ok()) << schedule.message();
  const int64_t V = s.vocab, L = s.layers, hq = s.qHeads,
                F = Decoder::kStatFields, prompt = 300, steps = 9, memory = 3;
  const auto ids = randomTokens(320, V, 41);
  std::vector<float> logits[3], stats[3]; // CPU, GPU, GPU without memory
  for (int run = 0; run < 3; ++run) {
    DecoderOptions o;
    o.backend = run == 0 ? BackendKind::CPU : BackendKind::GPU;
    o.kvType = KVType::F32;
    o.maxTokens = 512;
    o.fallbackMemory = run == 2 ? 0 : memory;
    auto dec = Decoder::create(w, *schedule, o);
    ASSERT_TRUE(dec.ok()) << dec.message();
    auto seq = (*dec)->newSequence();
    std::vector<float> scratch(static_cast<size_t>(V));
    ASSERT_TRUE((*dec)->prefill(seq, ids.data(), prompt, scratch.data()).ok());
    logits[run].assign(size_t(steps * V), std::nanf(""));
    for (int64_t i = 0; i < steps; ++i) {
      ASSERT_TRUE(
          (*dec)
              ->step(seq, ids[size_t(prompt + i)], logits[run].data() + i * V)
              .ok());
      stats[run].insert(stats[run].end(), (*dec)->stats().begin(),
                        (*dec)->stats().end());
    }
  }
  EXPECT_LT(maxRelative(logits[1], logits[0]), 1e-4);
  EXPECT_LT(maxRelative(logits[1], logits[2]), 1e-4);
  int64_t ranDense = 0;
  for (int64_t i = 0; i < steps; ++i)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < hq; ++h) {
        const size_t at = size_t(((i * L + l) * hq + h) * F);
        const float cpu = stats[0][at + kStatFallback],
                    gpu = stats[1][at + kStatFallback];
        // Fallback decisions: the same (kFellBack and kFellBackEarly may
        // differ by rounding, both are dense).
        EXPECT_EQ(cpu == 0.0f, gpu == 0.0f)
            << "step " << i << ", layer " << l << ", head " << h;
        EXPECT_EQ(cpu == ::condensate::abi::kRanDense,
                  gpu == ::condensate::abi::kRanDense)
            << "step " << i << ", layer " << l << ", head " << h;
        ranDense += gpu == ::condensate::abi::kRanDense;
      }
  EXPECT_EQ(ranDense, 6 * hq); // layer 0 at steps 1-3 and 5-7
}

TEST(GPUDecoder, MatchesCPUDecoderDense) {
  if (std::string why = skipReason(); !why.empty())
    GTEST_SKIP() << why;
  auto file = model::GGUFFile::open(modelPath());
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = model::Tokenizer::fromGGUF(*file);
  ASSERT_TRUE(tok.ok());
  auto weights = ModelWeights::load(*file);
  ASSERT_TRUE(weights.ok()) << weights.message();
  const ModelConfig &cfg = (*weights)->config();
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
  auto cpu = Decoder::create(*weights, dense, copts);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  DecoderOptions gopts;
  gopts.backend = BackendKind::GPU;
  gopts.kvType = KVType::F32;
  gopts.pageSize = 64;
  gopts.maxTokens = 1024;
  gopts.prefillChunk = 128;
  auto gpu = Decoder::create(*weights, dense, gopts);
  ASSERT_TRUE(gpu.ok()) << gpu.message();

  int64_t V = cfg.vocab;
  std::vector<float> cl(V), gl(V, NAN);
  auto seq = (*cpu)->newSequence();
  auto gseq = (*gpu)->newSequence();
  ASSERT_TRUE(
      (*cpu)->prefill(seq, prompt.data(), prompt.size(), cl.data()).ok());
  ASSERT_TRUE(
      (*gpu)->prefill(gseq, prompt.data(), prompt.size(), gl.data()).ok());
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
    ASSERT_TRUE((*gpu)->step(gseq, next, gl.data()).ok());
    double err = maxRelative(gl, cl);
    EXPECT_LT(err, 1e-3) << "step " << i;
    if (i % 8 == 0)
      std::printf("step %d: max relative logit difference %.2e\n", i, err);
  }
  const StepProfile &p = (*gpu)->prefillProfile();
  std::printf("GPU: %s; prefill %.0f tok/s; %lld decode steps\n",
              (*gpu)->deviceDescription().c_str(), p.steps / p.total,
              (long long)(*gpu)->profile().steps);
}

// Several sequences of different prompt lengths (and a fork of one) decode
// together, one batched step (one CUDA graph per batch size) at a time, and
// each row gives the CPU backend's logits for the same batch.
TEST(GPUDecoder, BatchedSequencesMatchCPUDecoder) {
  if (std::string why = skipReason(); !why.empty())
    GTEST_SKIP() << why;
  auto file = model::GGUFFile::open(modelPath());
  ASSERT_TRUE(file.ok()) << file.message();
  auto weights = ModelWeights::load(*file);
  ASSERT_TRUE(weights.ok()) << weights.message();
  const ModelConfig &cfg = (*weights)->config();
  const int64_t V = cfg.vocab;
  Schedule dense = Schedule::uniform(cfg.numLayers, Policy::makeDense());
  DecoderOptions opts;
  opts.kvType = KVType::F32;
  opts.pageSize = 16;
  opts.maxTokens = 4096;
  opts.prefillChunk = 64;
  opts.maxBatch = 8;
  auto cpu = Decoder::create(*weights, dense, opts);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  opts.backend = BackendKind::GPU;
  auto gpu = Decoder::create(*weights, dense, opts);
  ASSERT_TRUE(gpu.ok()) << gpu.message();

  // Prompts of 5, 37, 100 and 203 tokens: within one page, across pages,
  // across prefill chunks.
  std::vector<Decoder::SeqId> cs, gs;
  std::vector<int32_t> next;
  std::vector<float> cl(static_cast<size_t>(V)),
      gl(static_cast<size_t>(V), NAN);
  for (int64_t len : {5, 37, 100, 203}) {
    std::vector<int32_t> prompt(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i)
      prompt[size_t(i)] = int32_t(100 + (i * 37 + len * 11) % 5000);
    cs.push_back((*cpu)->newSequence());
    gs.push_back((*gpu)->newSequence());
    ASSERT_TRUE((*cpu)->prefill(cs.back(), prompt.data(), len, cl.data()).ok());
    ASSERT_TRUE((*gpu)->prefill(gs.back(), prompt.data(), len, gl.data()).ok());
    EXPECT_LT(maxRelative(gl, cl), 1e-3) << "prefill of " << len;
    next.push_back(argmax(cl.data(), V));
  }
  // A fork of the 37-token sequence: its first page shared, the rest copied.
  auto cf = (*cpu)->fork(cs[1]);
  auto gf = (*gpu)->fork(gs[1]);
  ASSERT_TRUE(cf.ok() && gf.ok()) << cf.message() << gf.message();
  cs.push_back(*cf);
  gs.push_back(*gf);
  next.push_back(next[1] == 7 ? 8 : 7); // diverges from its source

  std::vector<float> cb, gb;
  for (int step = 0; step < 12; ++step) {
    // Batches of 5, then 4 (a sequence leaves), then 3: several graphs.
    const int64_t B = step < 4 ? 5 : step < 8 ? 4 : 3;
    cb.assign(size_t(B * V), 0.0f);
    gb.assign(size_t(B * V), NAN);
    ASSERT_TRUE((*cpu)->step(cs.data(), next.data(), B, cb.data()).ok());
    ASSERT_TRUE((*gpu)->step(gs.data(), next.data(), B, gb.data()).ok());
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> c(cb.begin() + b * V, cb.begin() + (b + 1) * V);
      std::vector<float> g(gb.begin() + b * V, gb.begin() + (b + 1) * V);
      const double err = maxRelative(g, c);
      EXPECT_LT(err, 1e-3) << "step " << step << ", row " << b;
      EXPECT_EQ(argmax(g.data(), V), argmax(c.data(), V))
          << "step " << step << ", row " << b;
      next[size_t(b)] = argmax(c.data(), V);
    }
    for (int64_t b = 0; b < B; ++b)
      EXPECT_EQ((*gpu)->lastLens()[b], (*cpu)->lastLens()[b]);
    if (step == 0)
      std::printf("batch of %lld: row errors within 1e-3\n", (long long)B);
  }
  EXPECT_EQ((*gpu)->freePages(), (*cpu)->freePages());
  for (size_t i = 0; i < gs.size(); ++i)
    ASSERT_TRUE((*gpu)->release(gs[i]).ok());
  EXPECT_EQ((*gpu)->freePages(), (*gpu)->totalPages());
}

TEST(GPUDecoder, SparseScheduleRuns) {
  if (std::string why = skipReason(); !why.empty())
    GTEST_SKIP() << why;
  auto file = model::GGUFFile::open(modelPath());
  ASSERT_TRUE(file.ok());
  auto weights = ModelWeights::load(*file);
  ASSERT_TRUE(weights.ok());
  const ModelConfig &cfg = (*weights)->config();
  Policy p;
  p.anchor = 1;
  p.window = p.windowMax = 64;
  p.topk = 128;
  p.pageSize = 16;
  p.tau = 1e-2;
  p.maxExtra = 4;
  Schedule s = Schedule::uniform(cfg.numLayers, p);
  DecoderOptions gopts;
  gopts.backend = BackendKind::GPU;
  gopts.kvType = KVType::BF16;
  gopts.maxTokens = 2048;
  auto gpu = Decoder::create(*weights, s, gopts);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  std::vector<int32_t> prompt(1000);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = int32_t(100 + (i * 37) % 5000);
  std::vector<float> logits(cfg.vocab);
  auto seq = (*gpu)->newSequence();
  ASSERT_TRUE(
      (*gpu)->prefill(seq, prompt.data(), prompt.size(), logits.data()).ok());
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE((*gpu)
                    ->step(seq, argmax(logits.data(), cfg.vocab), logits.data())
                    .ok());
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
