//===- GPUDecoder.cpp - The Llama decoder on an NVIDIA GPU ----------------===//
//
// Device buffers, the element-wise kernels compiled from
// DecoderKernels.mlir, cuBLAS projections, the generated attention and
// append kernels, and the CUDA graph of one decode step.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/GPUDecoder.h"

#include "condensate/Cuda/Blas.h"
#include "condensate/Cuda/Driver.h"
#include "condensate/Decoder/CPUDecoder.h"
#include "condensate/Runtime/GPUProgram.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

namespace condensate::decoder {

namespace {

#include "DecoderKernels.inc" // kDecoderKernelsMLIR

using cuda::DevicePtr;

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// Appends a contiguous memref descriptor (base, base, 0, sizes, strides).
void pushMemRef(cuda::KernelArgs &args, DevicePtr base,
                std::initializer_list<int64_t> sizes) {
  args.u64(base).u64(base).i64(0);
  std::vector<int64_t> s(sizes);
  for (int64_t v : s)
    args.i64(v);
  std::vector<int64_t> strides(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * s[i + 1];
  for (int64_t v : strides)
    args.i64(v);
}

Result<cuda::DeviceBuffer> upload(const void *data, size_t bytes) {
  auto b = cuda::DeviceBuffer::allocate(std::max<size_t>(bytes, 4));
  if (!b.ok())
    return b.status();
  if (bytes)
    CONDENSATE_RETURN_IF_ERROR(b->copyFromHost(data, bytes));
  return b;
}

Result<cuda::DeviceBuffer> zeros(size_t bytes) {
  auto b = cuda::DeviceBuffer::allocate(std::max<size_t>(bytes, 4));
  if (!b.ok())
    return b.status();
  std::vector<uint8_t> z(bytes, 0);
  if (bytes)
    CONDENSATE_RETURN_IF_ERROR(b->copyFromHost(z.data(), bytes));
  return b;
}

struct DeviceLayer {
  cuda::DeviceBuffer attnNorm, wqkv, bqkv, wo, bo, ffnNorm, wgu, wdown;
  cuda::DeviceBuffer kCache, vCache, summaries;
};

} // namespace

struct GPUDecoder::Impl {
  std::shared_ptr<const LlamaWeights> weights;
  LlamaConfig cfg;
  GPUDecoderOptions options;
  ModelShape shape;
  Schedule schedule;
  int64_t page = 16, maxPages = 0, chunk = 256;

  cuda::Context context;
  cuda::Stream stream;
  cuda::Blas blas;
  cuda::Module kernels;
  std::map<std::string, cuda::Function> fn;
  std::unique_ptr<GPUProgram> policy, dense;

  std::vector<DeviceLayer> layers;
  cuda::DeviceBuffer embed, outNorm, outW, invFreq;
  // Activations, sized for a prefill chunk.
  cuda::DeviceBuffer x, xn, q, k, v, qkv, attn, gu, act, logits;
  cuda::DeviceBuffer tokens, positions, lens, windows, pageTable, pageRows;
  cuda::DeviceBuffer stats, prefillStats;

  std::vector<int32_t> history;
  std::vector<float> hostStats;
  std::vector<int32_t> hostWindows;
  int32_t hostScalars[3] = {0, 0, 0}; ///< token, position, length

  GPUTimings timings;
  bool haveGraph = false;
  cuda::GraphExec graph;

  int64_t H() const { return cfg.hidden; }
  int64_t F() const { return cfg.ffn; }
  int64_t V() const { return cfg.vocab; }

  Status launch(const char *name, cuda::Dim3 grid, cuda::Dim3 block,
                cuda::KernelArgs &args) {
    return cuda::launch(fn.at(name), grid, block, 0, stream, args.data());
  }
  Status rmsnorm(DevicePtr in, DevicePtr w, DevicePtr out, int64_t rows) {
    cuda::KernelArgs a;
    pushMemRef(a, in, {rows, H()});
    pushMemRef(a, w, {H()});
    pushMemRef(a, out, {rows, H()});
    a.f32(static_cast<float>(cfg.rmsEps));
    return launch("rmsnorm", {static_cast<unsigned>(rows), 1, 1},
                  {256, 1, 1}, a);
  }
  Status rope(DevicePtr vecs, int64_t rows, int64_t heads,
              DevicePtr positionsPtr) {
    cuda::KernelArgs a;
    int64_t pairs = cfg.ropeDim / 2;
    pushMemRef(a, vecs, {rows, heads, cfg.headDim});
    pushMemRef(a, positionsPtr, {rows});
    pushMemRef(a, invFreq.address(), {pairs});
    a.i32(cfg.ropeMode == RopeMode::Adjacent ? 1 : 0);
    unsigned threads = static_cast<unsigned>((pairs + 31) / 32 * 32);
    return launch("rope",
                  {static_cast<unsigned>(heads), static_cast<unsigned>(rows), 1},
                  {threads, 1, 1}, a);
  }
  Status addBias(DevicePtr y, DevicePtr b, int64_t rows, int64_t n) {
    cuda::KernelArgs a;
    pushMemRef(a, y, {rows, n});
    pushMemRef(a, b, {n});
    return launch("add_bias",
                  {static_cast<unsigned>((n + 255) / 256),
                   static_cast<unsigned>(rows), 1},
                  {256, 1, 1}, a);
  }
  /// out[rows, n] (+)= in[rows, k] * W[n, k]^T.
  Status gemm(int64_t rows, int64_t n, int64_t kdim, DevicePtr in,
              DevicePtr w, DevicePtr out, bool accumulate) {
    cuda::GemmOptions o;
    o.beta = accumulate ? 1.0f : 0.0f;
    return blas.gemm(static_cast<int>(rows), static_cast<int>(n),
                     static_cast<int>(kdim), cuda::ElementType::F32, in, w,
                     out, o);
  }

  AppendArgs appendArgs(int64_t l, DevicePtr kNew, DevicePtr vNew,
                        DevicePtr position) {
    AppendArgs a;
    a.batch = 1;
    a.maxPages = maxPages;
    a.numPages = maxPages;
    a.kNew = reinterpret_cast<const float *>(kNew);
    a.vNew = reinterpret_cast<const float *>(vNew);
    a.kCache = reinterpret_cast<void *>(layers[l].kCache.address());
    a.vCache = reinterpret_cast<void *>(layers[l].vCache.address());
    a.pageTable = reinterpret_cast<const int32_t *>(pageTable.address());
    a.positions = reinterpret_cast<const int32_t *>(position);
    a.summaries = reinterpret_cast<float *>(layers[l].summaries.address());
    return a;
  }

  /// The body of one decode step (captured into the graph).
  Status stepBody() {
    const int64_t qDim = cfg.qDim(), kvDim = cfg.kvDim();
    const int64_t qkvDim = cfg.qkvDim();
    {
      cuda::KernelArgs a;
      pushMemRef(a, embed.address(), {V(), H()});
      pushMemRef(a, tokens.address(), {1});
      pushMemRef(a, x.address(), {1, H()});
      CONDENSATE_RETURN_IF_ERROR(launch(
          "embed", {static_cast<unsigned>((H() + 255) / 256), 1, 1},
          {256, 1, 1}, a));
    }
    for (int64_t l = 0; l < cfg.numLayers; ++l) {
      DeviceLayer &L = layers[l];
      CONDENSATE_RETURN_IF_ERROR(
          rmsnorm(x.address(), L.attnNorm.address(), xn.address(), 1));
      CONDENSATE_RETURN_IF_ERROR(gemm(1, qkvDim, H(), xn.address(),
                                      L.wqkv.address(), qkv.address(), false));
      if (cfg.attentionBias)
        CONDENSATE_RETURN_IF_ERROR(
            addBias(qkv.address(), L.bqkv.address(), 1, qkvDim));
      CONDENSATE_RETURN_IF_ERROR(rope(qkv.address(), 1,
                                      cfg.qHeads + cfg.kvHeads,
                                      positions.address()));
      DevicePtr kNew = qkv.address() + qDim * 4;
      DevicePtr vNew = qkv.address() + (qDim + kvDim) * 4;
      CONDENSATE_RETURN_IF_ERROR(policy->append(
          appendArgs(l, kNew, vNew, positions.address()), stream));
      AttentionArgs at;
      at.batch = 1;
      at.maxPages = maxPages;
      at.numPages = maxPages;
      at.q = reinterpret_cast<const float *>(qkv.address());
      at.kCache = reinterpret_cast<const void *>(L.kCache.address());
      at.vCache = reinterpret_cast<const void *>(L.vCache.address());
      at.pageTable = reinterpret_cast<const int32_t *>(pageTable.address());
      at.lens = reinterpret_cast<const int32_t *>(lens.address());
      at.windows =
          reinterpret_cast<const int32_t *>(windows.address() + l * 4);
      at.summaries = reinterpret_cast<const float *>(L.summaries.address());
      at.out = reinterpret_cast<float *>(attn.address());
      at.stats = reinterpret_cast<float *>(
          stats.address() + l * cfg.qHeads * kAttentionStatsWidth * 4);
      CONDENSATE_RETURN_IF_ERROR(policy->attend(l, at, stream));
      CONDENSATE_RETURN_IF_ERROR(gemm(1, H(), qDim, attn.address(),
                                      L.wo.address(), x.address(), true));
      if (L.bo.size() > 4)
        CONDENSATE_RETURN_IF_ERROR(addBias(x.address(), L.bo.address(), 1, H()));
      CONDENSATE_RETURN_IF_ERROR(
          rmsnorm(x.address(), L.ffnNorm.address(), xn.address(), 1));
      CONDENSATE_RETURN_IF_ERROR(gemm(1, 2 * F(), H(), xn.address(),
                                      L.wgu.address(), gu.address(), false));
      {
        cuda::KernelArgs a;
        pushMemRef(a, gu.address(), {1, 2 * F()});
        pushMemRef(a, act.address(), {1, F()});
        CONDENSATE_RETURN_IF_ERROR(launch(
            "silu_mul", {static_cast<unsigned>((F() + 255) / 256), 1, 1},
            {256, 1, 1}, a));
      }
      CONDENSATE_RETURN_IF_ERROR(gemm(1, H(), F(), act.address(),
                                      L.wdown.address(), x.address(), true));
    }
    CONDENSATE_RETURN_IF_ERROR(
        rmsnorm(x.address(), outNorm.address(), xn.address(), 1));
    return gemm(1, V(), H(), xn.address(), outW.address(), logits.address(),
                false);
  }
};

GPUDecoder::GPUDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GPUDecoder::~GPUDecoder() = default;

Result<std::unique_ptr<GPUDecoder>>
GPUDecoder::create(std::shared_ptr<const LlamaWeights> weights,
                   const Schedule &schedule, const GPUDecoderOptions &options) {
  auto start = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  Impl &d = *impl;
  d.weights = weights;
  d.cfg = weights->config();
  d.options = options;
  const LlamaConfig &cfg = d.cfg;
  if (schedule.numLayers != cfg.numLayers)
    return Status::error("the schedule is for " +
                         std::to_string(schedule.numLayers) +
                         " layers but the model has " +
                         std::to_string(cfg.numLayers));
  auto page = schedulePageSize(schedule);
  if (!page.ok())
    return page.status();
  d.page = options.pageSize ? options.pageSize : (*page ? *page : 64);
  d.schedule = withPageSize(schedule, d.page);
  int64_t maxTokens = options.maxTokens
                          ? options.maxTokens
                          : (cfg.contextLength ? cfg.contextLength : 4096);
  d.maxPages = (maxTokens + d.page - 1) / d.page + 1;
  d.chunk = std::max<int64_t>(1, options.prefillChunk);
  d.shape = {cfg.numLayers, cfg.qHeads, cfg.kvHeads, cfg.headDim,
             d.page,        options.kvType, 0.0f};

  auto ctx = cuda::Context::primary(options.device);
  if (!ctx.ok())
    return ctx.status();
  d.context = ctx.take();
  auto stream = cuda::Stream::create();
  if (!stream.ok())
    return stream.status();
  d.stream = stream.take();
  auto blas = cuda::Blas::create(d.stream);
  if (!blas.ok())
    return blas.status();
  d.blas = blas.take();

  // Kernels: the element-wise ones and the schedule's attention.
  auto ptx = compileGPUModulesToPTX(kDecoderKernelsMLIR, "DecoderKernels.mlir",
                                    options.chip);
  if (!ptx.ok())
    return ptx.status();
  auto module = cuda::Module::loadPtx(*ptx);
  if (!module.ok())
    return module.status();
  d.kernels = module.take();
  for (const char *name : {"embed", "rmsnorm", "rope", "silu_mul", "add_bias"}) {
    auto f = d.kernels.getFunction(name);
    if (!f.ok())
      return f.status();
    d.fn.emplace(name, f.take());
  }
  GPUCompileOptions copts;
  copts.chip = options.chip;
  auto policyLib = getGPULibrary(d.shape, d.schedule, copts);
  if (!policyLib.ok())
    return policyLib.status();
  auto denseLib = getGPULibrary(
      d.shape, Schedule::uniform(cfg.numLayers, Policy::makeDense()), copts);
  if (!denseLib.ok())
    return denseLib.status();
  auto policy = GPUProgram::load(*policyLib, options.device);
  if (!policy.ok())
    return policy.status();
  auto dense = GPUProgram::load(*denseLib, options.device);
  if (!dense.ok())
    return dense.status();
  d.policy = policy.take();
  d.dense = dense.take();
  CONDENSATE_RETURN_IF_ERROR(d.policy->reserve(1, d.maxPages, d.maxPages));
  CONDENSATE_RETURN_IF_ERROR(d.dense->reserve(d.chunk, d.maxPages, d.maxPages));
  d.timings.compileSeconds = secondsSince(start);

  // Weights, float32 on the device.
  auto put = [](const std::vector<float> &v, cuda::DeviceBuffer &out) {
    auto b = upload(v.data(), v.size() * 4);
    if (!b.ok())
      return b.status();
    out = b.take();
    return Status::success();
  };
  size_t kvElems = static_cast<size_t>(d.maxPages) * cfg.kvHeads * d.page *
                   cfg.headDim;
  size_t kvBytes = kvElems * kvTypeBytes(options.kvType);
  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    const LayerWeights &w = weights->layer(l);
    DeviceLayer L;
    CONDENSATE_RETURN_IF_ERROR(put(w.attnNorm, L.attnNorm));
    CONDENSATE_RETURN_IF_ERROR(put(w.wqkv, L.wqkv));
    CONDENSATE_RETURN_IF_ERROR(put(w.bqkv, L.bqkv));
    CONDENSATE_RETURN_IF_ERROR(put(w.wo, L.wo));
    CONDENSATE_RETURN_IF_ERROR(put(w.bo, L.bo));
    CONDENSATE_RETURN_IF_ERROR(put(w.ffnNorm, L.ffnNorm));
    CONDENSATE_RETURN_IF_ERROR(put(w.wGateUp, L.wgu));
    CONDENSATE_RETURN_IF_ERROR(put(w.wDown, L.wdown));
    auto kc = zeros(kvBytes), vc = zeros(kvBytes);
    auto sm = zeros(static_cast<size_t>(d.maxPages) * cfg.kvHeads * 5 *
                    cfg.headDim * 4);
    if (!kc.ok() || !vc.ok() || !sm.ok())
      return Status::error("allocating the KV cache of layer " +
                           std::to_string(l) + " failed");
    L.kCache = kc.take();
    L.vCache = vc.take();
    L.summaries = sm.take();
    d.layers.push_back(std::move(L));
  }
  size_t embedBytes = static_cast<size_t>(cfg.vocab) * cfg.hidden * 4;
  auto emb = upload(weights->tokenEmbedding(), embedBytes);
  if (!emb.ok())
    return emb.status();
  d.embed = emb.take();
  std::vector<float> outNorm(weights->outputNorm(),
                             weights->outputNorm() + cfg.hidden);
  CONDENSATE_RETURN_IF_ERROR(put(outNorm, d.outNorm));
  if (cfg.tiedOutput) {
    auto o = upload(weights->outputWeights(), embedBytes);
    if (!o.ok())
      return o.status();
    d.outW = o.take();
  } else {
    auto o = upload(weights->outputWeights(), embedBytes);
    if (!o.ok())
      return o.status();
    d.outW = o.take();
  }
  std::vector<float> inv(cfg.ropeDim / 2);
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = static_cast<float>(
        std::pow(cfg.ropeTheta, -2.0 * double(i) / double(cfg.ropeDim)) /
        cfg.ropeLinearScale);
  CONDENSATE_RETURN_IF_ERROR(put(inv, d.invFreq));

  // Activations and per-step inputs.
  int64_t T = d.chunk;
  auto alloc = [](size_t bytes, cuda::DeviceBuffer &out) {
    auto b = zeros(bytes);
    if (!b.ok())
      return b.status();
    out = b.take();
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.hidden * 4, d.x));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.hidden * 4, d.xn));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.qDim() * 4, d.q));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.kvDim() * 4, d.k));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.kvDim() * 4, d.v));
  CONDENSATE_RETURN_IF_ERROR(alloc(cfg.qkvDim() * 4, d.qkv));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.qDim() * 4, d.attn));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * 2 * cfg.ffn * 4, d.gu));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * cfg.ffn * 4, d.act));
  CONDENSATE_RETURN_IF_ERROR(alloc(cfg.vocab * 4, d.logits));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * 4, d.tokens));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * 4, d.positions));
  CONDENSATE_RETURN_IF_ERROR(alloc(T * 4, d.lens));
  CONDENSATE_RETURN_IF_ERROR(
      alloc(std::max<int64_t>(T, cfg.numLayers) * 4, d.windows));
  CONDENSATE_RETURN_IF_ERROR(
      alloc(cfg.numLayers * cfg.qHeads * kAttentionStatsWidth * 4, d.stats));
  CONDENSATE_RETURN_IF_ERROR(
      alloc(T * cfg.qHeads * kAttentionStatsWidth * 4, d.prefillStats));
  // One sequence: pages in order. Prefill uses the same row T times.
  std::vector<int32_t> rowPages(d.maxPages);
  for (int64_t j = 0; j < d.maxPages; ++j)
    rowPages[j] = static_cast<int32_t>(j);
  std::vector<int32_t> rows(T * d.maxPages);
  for (int64_t t = 0; t < T; ++t)
    std::copy(rowPages.begin(), rowPages.end(), rows.begin() + t * d.maxPages);
  auto pt = upload(rowPages.data(), rowPages.size() * 4);
  auto pr = upload(rows.data(), rows.size() * 4);
  if (!pt.ok() || !pr.ok())
    return Status::error("allocating the page tables failed");
  d.pageTable = pt.take();
  d.pageRows = pr.take();
  d.hostStats.assign(cfg.numLayers * cfg.qHeads * kAttentionStatsWidth, 0.0f);
  d.hostWindows.assign(cfg.numLayers, 0);
  return std::unique_ptr<GPUDecoder>(new GPUDecoder(std::move(impl)));
}

void GPUDecoder::reset() { impl_->history.clear(); }
int64_t GPUDecoder::length() const {
  return static_cast<int64_t>(impl_->history.size());
}
const std::vector<float> &GPUDecoder::stats() const { return impl_->hostStats; }
const GPUTimings &GPUDecoder::timings() const { return impl_->timings; }
void GPUDecoder::resetTimings() {
  double compile = impl_->timings.compileSeconds;
  impl_->timings = GPUTimings();
  impl_->timings.compileSeconds = compile;
}

std::string GPUDecoder::deviceDescription() const {
  auto drv = cuda::Driver::get();
  if (!drv.ok())
    return "no GPU";
  auto props = (*drv)->deviceProperties(impl_->options.device);
  if (!props.ok())
    return "GPU";
  return props->name + " (sm_" + std::to_string(props->computeCapability()) +
         ", " + std::to_string(props->multiprocessorCount) + " SMs)";
}

Status GPUDecoder::prefill(const int32_t *tokens, int64_t count,
                           float *lastLogits,
                           const std::function<void(int64_t, int64_t)> &progress) {
  Impl &d = *impl_;
  const LlamaConfig &cfg = d.cfg;
  if (count <= 0)
    return Status::error("prefill: no tokens");
  int64_t start = static_cast<int64_t>(d.history.size());
  if ((start + count) > (d.maxPages - 1) * d.page)
    return Status::error("prefill: " + std::to_string(start + count) +
                         " tokens exceed the KV capacity of " +
                         std::to_string((d.maxPages - 1) * d.page));
  for (int64_t i = 0; i < count; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab)
      return Status::error("prefill: token " + std::to_string(tokens[i]) +
                           " outside the vocabulary");
  auto t0 = std::chrono::steady_clock::now();
  const int64_t qDim = cfg.qDim(), kvDim = cfg.kvDim();
  for (int64_t c0 = 0; c0 < count; c0 += d.chunk) {
    int64_t T = std::min(d.chunk, count - c0);
    std::vector<int32_t> pos(T), len(T);
    for (int64_t t = 0; t < T; ++t) {
      pos[t] = static_cast<int32_t>(start + c0 + t);
      len[t] = pos[t] + 1;
    }
    CONDENSATE_RETURN_IF_ERROR(d.tokens.copyFromHost(tokens + c0, T * 4));
    CONDENSATE_RETURN_IF_ERROR(d.positions.copyFromHost(pos.data(), T * 4));
    CONDENSATE_RETURN_IF_ERROR(d.lens.copyFromHost(len.data(), T * 4));
    {
      cuda::KernelArgs a;
      pushMemRef(a, d.embed.address(), {cfg.vocab, cfg.hidden});
      pushMemRef(a, d.tokens.address(), {T});
      pushMemRef(a, d.x.address(), {T, cfg.hidden});
      CONDENSATE_RETURN_IF_ERROR(d.launch(
          "embed",
          {static_cast<unsigned>((cfg.hidden + 255) / 256),
           static_cast<unsigned>(T), 1},
          {256, 1, 1}, a));
    }
    for (int64_t l = 0; l < cfg.numLayers; ++l) {
      DeviceLayer &L = d.layers[l];
      CONDENSATE_RETURN_IF_ERROR(
          d.rmsnorm(d.x.address(), L.attnNorm.address(), d.xn.address(), T));
      DevicePtr w = L.wqkv.address();
      CONDENSATE_RETURN_IF_ERROR(
          d.gemm(T, qDim, cfg.hidden, d.xn.address(), w, d.q.address(), false));
      CONDENSATE_RETURN_IF_ERROR(d.gemm(T, kvDim, cfg.hidden, d.xn.address(),
                                        w + qDim * cfg.hidden * 4,
                                        d.k.address(), false));
      CONDENSATE_RETURN_IF_ERROR(
          d.gemm(T, kvDim, cfg.hidden, d.xn.address(),
                 w + (qDim + kvDim) * cfg.hidden * 4, d.v.address(), false));
      if (cfg.attentionBias) {
        DevicePtr b = L.bqkv.address();
        CONDENSATE_RETURN_IF_ERROR(d.addBias(d.q.address(), b, T, qDim));
        CONDENSATE_RETURN_IF_ERROR(
            d.addBias(d.k.address(), b + qDim * 4, T, kvDim));
        CONDENSATE_RETURN_IF_ERROR(
            d.addBias(d.v.address(), b + (qDim + kvDim) * 4, T, kvDim));
      }
      CONDENSATE_RETURN_IF_ERROR(
          d.rope(d.q.address(), T, cfg.qHeads, d.positions.address()));
      CONDENSATE_RETURN_IF_ERROR(
          d.rope(d.k.address(), T, cfg.kvHeads, d.positions.address()));
      // Appends one position at a time: positions of one page updated by
      // concurrent blocks would race on its summary.
      for (int64_t t = 0; t < T; ++t)
        CONDENSATE_RETURN_IF_ERROR(d.dense->append(
            d.appendArgs(l, d.k.address() + t * kvDim * 4,
                         d.v.address() + t * kvDim * 4,
                         d.positions.address() + t * 4),
            d.stream));
      AttentionArgs at;
      at.batch = T;
      at.maxPages = d.maxPages;
      at.numPages = d.maxPages;
      at.q = reinterpret_cast<const float *>(d.q.address());
      at.kCache = reinterpret_cast<const void *>(L.kCache.address());
      at.vCache = reinterpret_cast<const void *>(L.vCache.address());
      at.pageTable = reinterpret_cast<const int32_t *>(d.pageRows.address());
      at.lens = reinterpret_cast<const int32_t *>(d.lens.address());
      at.windows = reinterpret_cast<const int32_t *>(d.windows.address());
      at.summaries = reinterpret_cast<const float *>(L.summaries.address());
      at.out = reinterpret_cast<float *>(d.attn.address());
      at.stats = reinterpret_cast<float *>(d.prefillStats.address());
      CONDENSATE_RETURN_IF_ERROR(d.dense->attend(l, at, d.stream));
      CONDENSATE_RETURN_IF_ERROR(d.gemm(T, cfg.hidden, qDim, d.attn.address(),
                                        L.wo.address(), d.x.address(), true));
      if (L.bo.size() > 4)
        CONDENSATE_RETURN_IF_ERROR(
            d.addBias(d.x.address(), L.bo.address(), T, cfg.hidden));
      CONDENSATE_RETURN_IF_ERROR(
          d.rmsnorm(d.x.address(), L.ffnNorm.address(), d.xn.address(), T));
      CONDENSATE_RETURN_IF_ERROR(d.gemm(T, 2 * cfg.ffn, cfg.hidden,
                                        d.xn.address(), L.wgu.address(),
                                        d.gu.address(), false));
      {
        cuda::KernelArgs a;
        pushMemRef(a, d.gu.address(), {T, 2 * cfg.ffn});
        pushMemRef(a, d.act.address(), {T, cfg.ffn});
        CONDENSATE_RETURN_IF_ERROR(d.launch(
            "silu_mul",
            {static_cast<unsigned>((cfg.ffn + 255) / 256),
             static_cast<unsigned>(T), 1},
            {256, 1, 1}, a));
      }
      CONDENSATE_RETURN_IF_ERROR(d.gemm(T, cfg.hidden, cfg.ffn,
                                        d.act.address(), L.wdown.address(),
                                        d.x.address(), true));
    }
    if (c0 + T >= count) {
      DevicePtr last = d.x.address() + (T - 1) * cfg.hidden * 4;
      CONDENSATE_RETURN_IF_ERROR(
          d.rmsnorm(last, d.outNorm.address(), d.xn.address(), 1));
      CONDENSATE_RETURN_IF_ERROR(d.gemm(1, cfg.vocab, cfg.hidden,
                                        d.xn.address(), d.outW.address(),
                                        d.logits.address(), false));
    }
    CONDENSATE_RETURN_IF_ERROR(d.stream.synchronize());
    if (progress)
      progress(c0 + T, count);
  }
  if (lastLogits)
    CONDENSATE_RETURN_IF_ERROR(
        d.logits.copyToHost(lastLogits, cfg.vocab * 4));
  d.history.insert(d.history.end(), tokens, tokens + count);
  d.timings.prefillSeconds += secondsSince(t0);
  d.timings.prefillTokens += count;
  return Status::success();
}

Status GPUDecoder::step(int32_t token, float *logits) {
  Impl &d = *impl_;
  const LlamaConfig &cfg = d.cfg;
  if (token < 0 || token >= cfg.vocab)
    return Status::error("step: token " + std::to_string(token) +
                         " outside the vocabulary");
  int64_t pos = static_cast<int64_t>(d.history.size());
  if (pos + 1 > (d.maxPages - 1) * d.page)
    return Status::error("step: the KV capacity of " +
                         std::to_string((d.maxPages - 1) * d.page) +
                         " tokens is full");
  auto t0 = std::chrono::steady_clock::now();
  d.history.push_back(token);
  // Per-step inputs, in device memory the graph reads.
  int32_t *scalars = d.hostScalars;
  scalars[0] = token;
  scalars[1] = static_cast<int32_t>(pos);
  scalars[2] = static_cast<int32_t>(pos + 1);
  double rep = repetitionScore(d.history.data(),
                               static_cast<int64_t>(d.history.size()),
                               d.options.repetitionSpan);
  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    const Policy &p = d.schedule.policyFor(l, 0);
    d.hostWindows[l] = static_cast<int32_t>(p.dense ? 0 : p.windowFor(rep));
  }
  CONDENSATE_RETURN_IF_ERROR(
      d.tokens.copyFromHostAsync(&scalars[0], 4, d.stream));
  CONDENSATE_RETURN_IF_ERROR(
      d.positions.copyFromHostAsync(&scalars[1], 4, d.stream));
  CONDENSATE_RETURN_IF_ERROR(d.lens.copyFromHostAsync(&scalars[2], 4, d.stream));
  CONDENSATE_RETURN_IF_ERROR(d.windows.copyFromHostAsync(
      d.hostWindows.data(), cfg.numLayers * 4, d.stream));
  if (d.options.cudaGraph) {
    if (!d.haveGraph) {
      auto capture = cuda::StreamCapture::begin(d.stream);
      if (!capture.ok())
        return capture.status();
      Status body = d.stepBody();
      auto graph = capture->end();
      if (!body.ok())
        return body.withContext("capturing the decode step");
      if (!graph.ok())
        return graph.status();
      auto exec = graph->instantiate();
      if (!exec.ok())
        return exec.status();
      d.graph = exec.take();
      d.haveGraph = true;
    }
    CONDENSATE_RETURN_IF_ERROR(d.graph.launch(d.stream));
  } else {
    CONDENSATE_RETURN_IF_ERROR(d.stepBody());
  }
  if (logits)
    CONDENSATE_RETURN_IF_ERROR(
        d.logits.copyToHostAsync(logits, cfg.vocab * 4, d.stream));
  CONDENSATE_RETURN_IF_ERROR(d.stats.copyToHostAsync(
      d.hostStats.data(), d.hostStats.size() * 4, d.stream));
  CONDENSATE_RETURN_IF_ERROR(d.stream.synchronize());
  d.timings.decodeSeconds += secondsSince(t0);
  d.timings.decodeSteps += 1;
  return Status::success();
}

} // namespace condensate::decoder
