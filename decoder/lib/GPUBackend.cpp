//===- GPUBackend.cpp - The recipe's operations on an NVIDIA GPU ----------===//
//
// Weights, activations, the page pool and every per-pass input live in
// device memory. The weight matrices are float32, or bfloat16 rounded once
// at upload (DecoderOptions::weightType); norms, biases, RoPE tables and the
// embedding table the lookup reads stay float32. Projections run through
// cuBLAS (bfloat16 ones on input rows rounded by a kernel), the element-wise
// work through kernels compiled from DecoderKernels.mlir, attention and the
// KV append through the generated condensate kernels (GPUProgram: the
// schedule's for decode rows, a dense one for prefill rows). A decode pass
// is captured into a CUDA graph once per batch size and replayed: its
// inputs sit at fixed device addresses that begin() refills, and the page
// table has a fixed row width, so one graph serves every step of that size.
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

#include "condensate/Compiler/Compiler.h"
#include "condensate/Compiler/Tuner.h"
#include "condensate/Cuda/Blas.h"
#include "condensate/Cuda/Driver.h"
#include "condensate/Runtime/GPUProgram.h"
#include "condensate/Support/BFloat16.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <type_traits>

namespace condensate::decoder {

namespace {

#include "DecoderKernels.inc" // kDecoderKernelsMLIR

using cuda::DevicePtr;

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// A device address as the pointer type of the runtime's argument structs.
template <typename T> T *dev(DevicePtr p) {
  return reinterpret_cast<T *>(static_cast<uintptr_t>(p));
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
    strides[size_t(i)] = strides[size_t(i + 1)] * s[size_t(i + 1)];
  for (int64_t v : strides)
    args.i64(v);
}

unsigned blocksFor(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

/// A device buffer of `bytes` (at least 4, so it has an address), zeroed
/// on `stream`.
Status allocate(size_t bytes, const cuda::Stream &stream,
                cuda::DeviceBuffer &out) {
  auto b = cuda::DeviceBuffer::allocate(std::max<size_t>(bytes, 4));
  if (!b.ok())
    return b.status();
  out = b.take();
  return out.memset8Async(0, out.size(), stream);
}

/// A device copy of `count` elements of `T` (float, or bfloat16 bits).
template <typename T>
Status upload(const T *data, size_t count, cuda::DeviceBuffer &out) {
  const size_t bytes = count * sizeof(T);
  auto b = cuda::DeviceBuffer::allocate(std::max<size_t>(bytes, 4));
  if (!b.ok())
    return b.status();
  out = b.take();
  return count ? out.copyFromHost(data, bytes) : Status::success();
}

/// A schedule loaded on the device; serves the decoder that compiled it.
class GPUAttention final : public AttentionProgram {
public:
  const Schedule &schedule() const override { return schedule_; }
  double compileSeconds() const override { return seconds; }
  std::string tuning() const override { return tuning_; }
  Schedule schedule_;
  double seconds = 0.0;
  std::string tuning_;
  std::unique_ptr<GPUProgram> program;
  const void *owner = nullptr;
};

struct DeviceLayer {
  cuda::DeviceBuffer attnNorm, wqkv, bqkv, wo, bo, ffnNorm, wGateUp, wDown;
  cuda::DeviceBuffer qNorm, kNorm, postAttnNorm, postFfnNorm;
  cuda::DeviceBuffer k, v, summaries;
};

class GPUBackend final : public Backend {
public:
  static Result<std::unique_ptr<Backend>> create(const BackendSetup &setup);

  std::string description() const override;
  const WeightFootprint &weightFootprint() const override { return footprint_; }
  std::string memoryUse() const override {
    auto info = context_.memoryInfo();
    if (!info.ok())
      return "";
    char text[64];
    std::snprintf(text, sizeof text, "%.1f GB of %.1f GB in use",
                  double(info->second - info->first) / 1e9,
                  double(info->second) / 1e9);
    return text;
  }
  double compileSeconds() const override { return compileSeconds_; }
  bool synchronous() const override { return false; }
  int64_t maxRows() const override { return maxRows_; }
  int64_t tableWidth(int64_t) const override { return width_; }
  const ModelParams &params() const override { return params_; }

  Result<std::shared_ptr<const AttentionProgram>>
  compile(const Schedule &schedule) const override {
    auto p = load(schedule);
    if (!p)
      return p.status();
    return std::shared_ptr<const AttentionProgram>(p.take());
  }
  std::shared_ptr<const AttentionProgram> program() const override {
    return program_;
  }
  Status setProgram(std::shared_ptr<const AttentionProgram> p) override;

  Status copyPage(int32_t from, int32_t to) override;
  Decoder::CacheView cache(int64_t layer) const override;

  Status begin(const ForwardBatch &batch) override;
  Status run(const std::function<Status()> &body) override;
  Status finish(float *logits, int64_t logitRows) override;
  const std::vector<float> &stats() const override { return hostStats_; }
  std::vector<float> &stats() override { return hostStats_; }
  const std::vector<float> &queries() const override;

  Status embed(float scale) override;
  Status rmsNorm(Buf in, const Param &weight, Buf out, Rows rows,
                 bool accumulate) override;
  Status headNorm(Buf qOrK, const Param &weight) override;
  Status linear(Buf in, const Param &weight, const Param &bias, Buf out,
                bool accumulate, Rows rows) override;
  Status splitQKV() override;
  Status rope(Buf qOrK, int64_t layer) override;
  Status splitRope(int64_t layer) override;
  Status append(int64_t layer) override;
  Status attend(int64_t layer) override;
  Status prefillAttend(int64_t layer) override;
  Status activation(Activation kind) override;
  Status keepQueries(int64_t layer) override;

private:
  /// The schedule's program; `decodes` false for the prefill program,
  /// whose decode kernels never run (so it is never tuned).
  Result<std::shared_ptr<GPUAttention>> load(const Schedule &schedule,
                                             bool decodes = true) const;
  Status uploadWeights(const ModelWeights &w);
  Status launch(const char *name, cuda::Dim3 grid, cuda::Dim3 block,
                cuda::KernelArgs &args) {
    return cuda::launch(functions_.at(name), grid, block, 0, stream_,
                        args.data());
  }
  DevicePtr addr(Buf b) const { return bufs_[size_t(b)].address(); }
  bool bf16Weights() const { return options_.weightType == WeightType::BF16; }
  int64_t width(Buf b) const { return bufferWidth(b, cfg_); }
  int64_t rows() const { return batch_->rows; }
  int64_t count(Rows r) const { return r.count < 0 ? rows() : r.count; }
  /// The fields of AttentionArgs and AppendArgs: sizes, layer `l`'s pool
  /// and the page table.
  template <typename Args> Args pagedArgs(int64_t l) const {
    const DeviceLayer &L = layers_[size_t(l)];
    Args a;
    a.batch = rows();
    a.maxPages = width_;
    a.numPages = numPages_;
    a.kCache = dev<void>(L.k.address());
    a.vCache = dev<void>(L.v.address());
    a.pageTable = dev<const int32_t>(pageTable_.address());
    a.summaries = dev<float>(L.summaries.address());
    return a;
  }
  AttentionArgs attentionArgs(int64_t l) const;
  AppendArgs appendArgs(int64_t l) const;

  ModelConfig cfg_;
  ModelShape shape_;
  DecoderOptions options_;
  int64_t numPages_ = 0, width_ = 0, maxRows_ = 0;
  double compileSeconds_ = 0.0;

  cuda::Context context_;
  cuda::Stream stream_;
  cuda::Blas blas_;
  cuda::Module kernels_;
  std::map<std::string, cuda::Function> functions_;
  /// The schedule's program, and the prefill schedule's (its prefill
  /// functions and the append both programs share).
  std::shared_ptr<GPUAttention> program_, dense_;

  std::vector<DeviceLayer> layers_;
  /// invFreq_/invFreqLocal_: RoPE of the global and the local layers.
  /// output_ is absent when the logits read embedding_ (tied, float32);
  /// tied with bfloat16 weights it is the table's bfloat16 copy.
  cuda::DeviceBuffer embedding_, outputNorm_, output_, invFreq_,
      invFreqLocal_;
  ModelParams params_;
  WeightFootprint footprint_;
  /// With bfloat16 weights: a projection's input rows rounded to bfloat16,
  /// [maxRows_, widest input] (linearInputCols_).
  cuda::DeviceBuffer linearInput_;
  int64_t linearInputCols_ = 0;
  /// The rows linearInput_ holds when the kernel that wrote `buf` (a norm,
  /// an activation) also wrote their bfloat16 rounding there: the next
  /// linear over exactly those rows skips its round_bf16 launch.
  struct Rounded {
    Buf buf = Buf::X;
    int64_t rows = -1, cols = -1;
    bool operator==(const Rounded &o) const {
      return buf == o.buf && rows == o.rows && cols == o.cols;
    }
  } rounded_;
  /// The bias of the fused q/k/v projection when linear left it for the
  /// split to add (splitRope in its pass, splitQKV by add_bias first).
  Param qkvBias_;
  /// The rounded copy's arguments of a kernel writing `n` rows of `cols`
  /// of `buf`: with bfloat16 weights and `round`, linearInput_ (and
  /// rounded_ set); otherwise none (round 0, rounded_ cleared).
  void pushRounded(cuda::KernelArgs &a, Buf buf, int64_t n, int64_t cols,
                   bool round);
  /// out[:n] += bias (add_bias).
  Status addBias(Buf out, const Param &bias, int64_t n);
  std::vector<cuda::DeviceBuffer> bufs_ =
      std::vector<cuda::DeviceBuffer>(kNumBufs);
  cuda::DeviceBuffer tokens_, positions_, lens_, pageTable_, windows_;
  cuda::DeviceBuffer stats_, queries_;
  /// A prefill pass's lens and row starts (prefillHost_ on the device).
  cuda::DeviceBuffer prefillRows_;
  std::array<int32_t, 3> prefillHost_{};

  const ForwardBatch *batch_ = nullptr;
  /// Decode graphs by batch size; cleared when the program changes.
  /// A captured decode step per (program, batch size). Each keeps its
  /// program alive: its kernels and workspace are what the graph launches.
  struct CapturedStep {
    std::shared_ptr<const GPUAttention> program;
    cuda::GraphExec exec;
  };
  /// Keyed by program, batch size and ForwardBatch::denseLayers (the
  /// fallback memory's plan; at most one besides all-zero is kept).
  using GraphKey =
      std::tuple<const GPUAttention *, int64_t, std::vector<uint8_t>>;
  std::map<GraphKey, CapturedStep> graphs_;
  /// BackendSetup::dense loaded with its decode functions (dense_ when the
  /// two schedules agree).
  std::shared_ptr<GPUAttention> denseDecode_;
  std::vector<float> hostStats_;
  int64_t queryRows_ = 0; ///< rows of the last decode
  mutable bool queriesFresh_ = false;
  mutable std::vector<float> hostQueries_;
  mutable std::vector<uint8_t> hostK_, hostV_;
  mutable std::vector<float> hostSummaries_;
};

Result<std::shared_ptr<GPUAttention>>
GPUBackend::load(const Schedule &schedule, bool decodes) const {
  auto start = std::chrono::steady_clock::now();
  GPUCompileOptions copts;
  copts.chip = options_.chip;
  if (decodes && !options_.tuneFor.empty() &&
      findTuningRecord(shape_, schedule, copts.chip, copts.cacheDir).empty()) {
    TuneOptions tune;
    tune.device = options_.device;
    tune.cacheDir = copts.cacheDir;
    tune.workloads.clear();
    for (auto [batch, context] : options_.tuneFor)
      tune.workloads.push_back({batch, context});
    auto tuned = tuneGPULibrary(shape_, schedule, tune);
    if (!tuned.ok())
      return tuned.status().withContext("tuning the attention kernels");
    if (tune.cacheDir.empty() || tuned->chip != copts.chip)
      copts.tuning = tuned->candidates[tuned->best].tuning;
  }
  GPUCompileReport report;
  auto library = getGPULibrary(shape_, schedule, copts, &report);
  if (!library.ok())
    return library.status();
  auto program = GPUProgram::load(*library, options_.device);
  if (!program.ok())
    return program.status();
  auto p = std::make_shared<GPUAttention>();
  p->schedule_ = schedule;
  if (report.tuned || copts.tuning)
    p->tuning_ = report.tuning.options();
  p->program = program.take();
  // Sized for the largest decode call, so no launch allocates (graph
  // capture); prefill calls need no workspace.
  CONDENSATE_RETURN_IF_ERROR(
      p->program->reserve(options_.maxBatch, width_, numPages_));
  p->owner = this;
  p->seconds = secondsSince(start);
  return p;
}

Result<std::unique_ptr<Backend>> GPUBackend::create(const BackendSetup &setup) {
  auto start = std::chrono::steady_clock::now();
  auto be = std::make_unique<GPUBackend>();
  GPUBackend &d = *be;
  d.cfg_ = setup.weights->config();
  d.shape_ = setup.shape;
  d.options_ = setup.options;
  d.numPages_ = setup.numPages;
  d.width_ = setup.maxTablePages;
  d.maxRows_ = std::max(setup.options.prefillChunk, setup.options.maxBatch);
  const ModelConfig &cfg = d.cfg_;

  auto ctx = cuda::Context::primary(setup.options.device);
  if (!ctx.ok())
    return ctx.status();
  d.context_ = ctx.take();
  auto stream = cuda::Stream::create();
  if (!stream.ok())
    return stream.status();
  d.stream_ = stream.take();
  auto blas = cuda::Blas::create(d.stream_);
  if (!blas.ok())
    return blas.status();
  d.blas_ = blas.take();

  // Kernels: the element-wise ones, the schedule's attention and the dense
  // attention of prefill.
  auto ptx = compileGPUModulesToPTX(kDecoderKernelsMLIR, "DecoderKernels.mlir",
                                    setup.options.chip);
  if (!ptx.ok())
    return ptx.status();
  auto module = cuda::Module::loadPtx(*ptx);
  if (!module.ok())
    return module.status();
  d.kernels_ = module.take();
  for (const char *name :
       {"embed", "rmsnorm", "rope", "silu_mul", "gelu_mul", "add_bias",
        "split_qkv", "split_rope", "round_bf16"}) {
    auto f = d.kernels_.getFunction(name);
    if (!f.ok())
      return f.status();
    d.functions_.emplace(name, f.take());
  }
  auto program = d.load(setup.schedule);
  if (!program.ok())
    return program.status();
  d.program_ = program.take();
  // Prefill attends as the model does (decoder::prefillSchedule), through
  // the prefill functions of this second program.
  // With the fallback memory and the model's own prefill attention, the
  // same program runs the layers the memory sends to dense attention.
  const bool shareDense = setup.dense && setup.options.prefillWindow == 0;
  auto dense = d.load(setup.prefill, /*decodes=*/shareDense);
  if (!dense.ok())
    return dense.status();
  d.dense_ = dense.take();
  if (shareDense) {
    d.denseDecode_ = d.dense_;
  } else if (setup.dense) {
    auto denseDecode = d.load(*setup.dense);
    if (!denseDecode.ok())
      return denseDecode.status();
    d.denseDecode_ = denseDecode.take();
  }
  d.compileSeconds_ = secondsSince(start);

  CONDENSATE_RETURN_IF_ERROR(d.uploadWeights(*setup.weights));
  const size_t pageBytes = size_t(cfg.kvHeads * d.shape_.pageSize *
                                  cfg.headDim * kvTypeBytes(d.shape_.kvType));
  const size_t summaryBytes =
      size_t(abi::summaryElements(1, modelDims(d.shape_))) * 4;
  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    DeviceLayer &L = d.layers_[size_t(l)];
    const size_t pages = size_t(d.numPages_);
    for (auto [buffer, bytes] :
         {std::pair{&L.k, pageBytes}, std::pair{&L.v, pageBytes},
          std::pair{&L.summaries, summaryBytes}})
      CONDENSATE_RETURN_IF_ERROR(
          allocate(pages * bytes, d.stream_, *buffer)
              .withContext("allocating the KV cache of layer " +
                           std::to_string(l)));
  }

  // Activations and per-pass inputs, sized for the largest pass.
  const size_t R = size_t(d.maxRows_), L = size_t(cfg.numLayers);
  for (int b = 0; b < kNumBufs; ++b)
    CONDENSATE_RETURN_IF_ERROR(allocate(R * size_t(d.width(Buf(b))) * 4,
                                        d.stream_, d.bufs_[size_t(b)]));
  for (cuda::DeviceBuffer *b : {&d.tokens_, &d.positions_, &d.lens_})
    CONDENSATE_RETURN_IF_ERROR(allocate(R * 4, d.stream_, *b));
  if (d.bf16Weights()) {
    // The widest input of a projection: hidden (q/k/v, gate/up, logits),
    // the attention rows (output) or ffn (down).
    d.linearInputCols_ = std::max({cfg.hidden, cfg.qDim(), cfg.ffn});
    CONDENSATE_RETURN_IF_ERROR(allocate(R * size_t(d.linearInputCols_) * 2,
                                        d.stream_, d.linearInput_));
  }
  CONDENSATE_RETURN_IF_ERROR(
      allocate(R * size_t(d.width_) * 4, d.stream_, d.pageTable_));
  // Per-layer windows, stats and kept queries exist for decode rows only.
  const size_t B = size_t(setup.options.maxBatch);
  CONDENSATE_RETURN_IF_ERROR(allocate(L * B * 4, d.stream_, d.windows_));
  const size_t statRow = size_t(cfg.qHeads * Decoder::kStatFields) * 4;
  CONDENSATE_RETURN_IF_ERROR(allocate(L * B * statRow, d.stream_, d.stats_));
  CONDENSATE_RETURN_IF_ERROR(allocate(3 * 4, d.stream_, d.prefillRows_));
  CONDENSATE_RETURN_IF_ERROR(
      allocate(L * B * size_t(cfg.qDim()) * 4, d.stream_, d.queries_));
  CONDENSATE_RETURN_IF_ERROR(d.stream_.synchronize());
  return std::unique_ptr<Backend>(std::move(be));
}

Status GPUBackend::uploadWeights(const ModelWeights &w) {
  const ModelConfig &cfg = cfg_;
  int64_t &held = footprint_.heldBytes;
  // A matrix as float32, a quantised one dequantised to upload it.
  auto putF32 = [](const WeightMatrix &m, cuda::DeviceBuffer &out) {
    const std::vector<float> f =
        m.quantized() ? m.toF32() : std::vector<float>();
    return upload(m.quantized() ? f.data() : m.f32(),
                  size_t(m.rows() * m.cols()), out);
  };
  // A matrix as the weight type says, a vector as float32.
  auto put = [&](const auto &v, cuda::DeviceBuffer &out, Param &p) -> Status {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, WeightMatrix>) {
      const size_t n = size_t(v.rows() * v.cols());
      if (bf16Weights()) {
        const std::vector<uint16_t> b = v.toBF16();
        CONDENSATE_RETURN_IF_ERROR(upload(b.data(), n, out));
      } else {
        CONDENSATE_RETURN_IF_ERROR(putF32(v, out));
      }
      p = Param{out.address(), int64_t(n)};
      held += int64_t(n) * (bf16Weights() ? 2 : 4);
    } else {
      CONDENSATE_RETURN_IF_ERROR(upload(v.data(), v.size(), out));
      p = Param{out.address(), int64_t(v.size())};
      held += int64_t(v.size()) * 4;
    }
    return Status::success();
  };
  layers_.resize(size_t(cfg.numLayers));
  params_.layers.resize(size_t(cfg.numLayers));
  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    const LayerWeights &src = w.layer(l);
    DeviceLayer &L = layers_[size_t(l)];
    LayerParams &P = params_.layers[size_t(l)];
    CONDENSATE_RETURN_IF_ERROR(put(src.attnNorm, L.attnNorm, P.attnNorm));
    CONDENSATE_RETURN_IF_ERROR(put(src.wqkv, L.wqkv, P.wqkv));
    CONDENSATE_RETURN_IF_ERROR(put(src.bqkv, L.bqkv, P.bqkv));
    CONDENSATE_RETURN_IF_ERROR(put(src.wo, L.wo, P.wo));
    CONDENSATE_RETURN_IF_ERROR(put(src.bo, L.bo, P.bo));
    CONDENSATE_RETURN_IF_ERROR(put(src.ffnNorm, L.ffnNorm, P.ffnNorm));
    CONDENSATE_RETURN_IF_ERROR(put(src.wGateUp, L.wGateUp, P.wGateUp));
    CONDENSATE_RETURN_IF_ERROR(put(src.wDown, L.wDown, P.wDown));
    CONDENSATE_RETURN_IF_ERROR(put(src.qNorm, L.qNorm, P.qNorm));
    CONDENSATE_RETURN_IF_ERROR(put(src.kNorm, L.kNorm, P.kNorm));
    CONDENSATE_RETURN_IF_ERROR(
        put(src.postAttnNorm, L.postAttnNorm, P.postAttnNorm));
    CONDENSATE_RETURN_IF_ERROR(
        put(src.postFfnNorm, L.postFfnNorm, P.postFfnNorm));
  }
  // The embedding lookup ("embed") reads float32 rows whatever the weight
  // type, and a step reads only its rows of the table, unless the table is
  // also the logits' matrix.
  const WeightMatrix &table = w.tokenEmbedding();
  const int64_t tableElements = table.rows() * table.cols();
  CONDENSATE_RETURN_IF_ERROR(putF32(table, embedding_));
  params_.embedding = Param{embedding_.address(), tableElements};
  held += tableElements * 4;
  const bool tableIsOutput = cfg.tiedOutput && !bf16Weights();
  if (tableIsOutput)
    params_.output = params_.embedding; // one copy serves both
  else // output.weight, or (tied) a bfloat16 copy of the table for the
       // logits: 2 bytes more held per element, 2 fewer read a step
    CONDENSATE_RETURN_IF_ERROR(put(w.outputWeights(), output_, params_.output));
  CONDENSATE_RETURN_IF_ERROR(
      upload(w.outputNorm(), size_t(cfg.hidden), outputNorm_));
  params_.outputNorm = Param{outputNorm_.address(), cfg.hidden};
  held += cfg.hidden * 4;
  footprint_.stepBytes = held - (tableIsOutput ? 0 : tableElements * 4);
  // The rope kernel's angle is position * invFreq (ropeFrequencies).
  for (auto [local, out] : {std::pair{false, &invFreq_},
                            std::pair{true, &invFreqLocal_}}) {
    const std::vector<double> f = w.ropeFrequencies(local);
    std::vector<float> inv(f.begin(), f.end());
    CONDENSATE_RETURN_IF_ERROR(upload(inv.data(), inv.size(), *out));
  }
  return Status::success();
}

std::string GPUBackend::description() const {
  auto drv = cuda::Driver::get();
  if (!drv.ok())
    return "no GPU";
  auto props = (*drv)->deviceProperties(options_.device);
  if (!props.ok())
    return "GPU";
  return props->name + " (sm_" + std::to_string(props->computeCapability()) +
         ", " + std::to_string(props->multiprocessorCount) + " SMs), weights " +
         weightTypeName(options_.weightType);
}

Status GPUBackend::setProgram(std::shared_ptr<const AttentionProgram> p) {
  auto gpu = std::dynamic_pointer_cast<const GPUAttention>(p);
  if (!gpu || gpu->owner != this)
    return Status::error("setProgram: the program was not compiled by this "
                         "GPU decoder");
  // Graphs are kept per program, so switching back and forth (a policy
  // batch and a dense batch on one decoder) replays instead of capturing.
  program_ = std::const_pointer_cast<GPUAttention>(std::move(gpu));
  return Status::success();
}

Status GPUBackend::copyPage(int32_t from, int32_t to) {
  const size_t pageBytes = size_t(cfg_.kvHeads * shape_.pageSize *
                                  cfg_.headDim * kvTypeBytes(shape_.kvType));
  const size_t summaryBytes =
      size_t(abi::summaryElements(1, modelDims(shape_))) * 4;
  for (DeviceLayer &L : layers_)
    for (auto [buffer, bytes] :
         {std::pair{&L.k, pageBytes}, std::pair{&L.v, pageBytes},
          std::pair{&L.summaries, summaryBytes}})
      CONDENSATE_RETURN_IF_ERROR(buffer->copyFromDeviceAsync(
          *buffer, bytes, stream_, size_t(from) * bytes, size_t(to) * bytes));
  return Status::success();
}

Decoder::CacheView GPUBackend::cache(int64_t layer) const {
  Decoder::CacheView view;
  if (layer < 0 || layer >= cfg_.numLayers || !stream_.synchronize().ok())
    return view;
  const DeviceLayer &L = layers_[size_t(layer)];
  hostK_.resize(L.k.size());
  hostV_.resize(L.v.size());
  hostSummaries_.resize(L.summaries.size() / 4);
  if (!L.k.download(hostK_).ok() || !L.v.download(hostV_).ok() ||
      !L.summaries.download(hostSummaries_).ok())
    return view;
  view.k = hostK_.data();
  view.v = hostV_.data();
  view.summaries = hostSummaries_.data();
  view.numPages = numPages_;
  return view;
}

Status GPUBackend::begin(const ForwardBatch &batch) {
  if (batch.rows > maxRows_ || batch.tableWidth != width_)
    return Status::error("GPU forward of " + std::to_string(batch.rows) +
                         " rows x " + std::to_string(batch.tableWidth) +
                         " pages; sized for " + std::to_string(maxRows_) +
                         " x " + std::to_string(width_));
  batch_ = &batch;
  rounded_ = Rounded{};
  qkvBias_ = Param();
  const size_t R = size_t(batch.rows);
  CONDENSATE_RETURN_IF_ERROR(
      tokens_.copyFromHostAsync(batch.tokens.data(), R * 4, stream_));
  CONDENSATE_RETURN_IF_ERROR(
      positions_.copyFromHostAsync(batch.positions.data(), R * 4, stream_));
  CONDENSATE_RETURN_IF_ERROR(
      lens_.copyFromHostAsync(batch.lens.data(), R * 4, stream_));
  CONDENSATE_RETURN_IF_ERROR(pageTable_.copyFromHostAsync(
      batch.pageTable.data(), batch.pageTable.size() * 4, stream_));
  if (batch.kind == ForwardKind::Decode)
    CONDENSATE_RETURN_IF_ERROR(windows_.copyFromHostAsync(
        batch.windows.data(), batch.windows.size() * 4, stream_));
  if (batch.kind == ForwardKind::Prefill) {
    // lens [1] and row starts [2] of the one sequence prefillAttend passes:
    // its rows are consecutive positions ending at the last row's.
    prefillHost_ = {batch.positions[R - 1] + 1, 0, int32_t(R)};
    PrefillArgs check;
    check.rows = int64_t(R);
    check.seqs = 1;
    check.maxPages = width_;
    check.numPages = numPages_;
    check.pageTable = batch.pageTable.data();
    check.lens = prefillHost_.data();
    check.rowStarts = prefillHost_.data() + 1;
    check.q = dev<const float>(addr(Buf::Q));
    check.out = dev<float>(addr(Buf::Attn));
    check.kCache = check.vCache = dev<void>(layers_[0].k.address());
    CONDENSATE_RETURN_IF_ERROR(
        checkPrefillArgs(shape_, check, /*hostTables=*/true));
    CONDENSATE_RETURN_IF_ERROR(prefillRows_.copyFromHostAsync(
        prefillHost_.data(), prefillHost_.size() * 4, stream_));
  }
  return Status::success();
}

Status GPUBackend::run(const std::function<Status()> &body) {
  if (batch_->kind != ForwardKind::Decode || !options_.cudaGraph)
    return body();
  GraphKey key{program_.get(), rows(), batch_->denseLayers};
  if (std::find(batch_->denseLayers.begin(), batch_->denseLayers.end(), 1) ==
      batch_->denseLayers.end())
    std::get<2>(key).clear(); // no layer dense: one key however it is sized
  auto it = graphs_.find(key);
  if (it == graphs_.end() && !std::get<2>(key).empty()) {
    // A new plan of the fallback memory replaces the program's old one.
    for (auto g = graphs_.begin(); g != graphs_.end();) {
      if (std::get<0>(g->first) == program_.get() &&
          std::get<1>(g->first) == rows() && !std::get<2>(g->first).empty())
        g = graphs_.erase(g);
      else
        ++g;
    }
  }
  if (it == graphs_.end()) {
    auto capture = cuda::StreamCapture::begin(stream_);
    if (!capture.ok())
      return capture.status();
    Status st = body();
    auto graph = capture->end();
    if (!st.ok())
      return st.withContext("capturing the decode step");
    if (!graph.ok())
      return graph.status();
    auto exec = graph->instantiate();
    if (!exec.ok())
      return exec.status();
    it = graphs_.emplace(key, CapturedStep{program_, exec.take()}).first;
  }
  return it->second.exec.launch(stream_);
}

Status GPUBackend::finish(float *logits, int64_t logitRows) {
  if (logits && logitRows > 0)
    CONDENSATE_RETURN_IF_ERROR(bufs_[size_t(Buf::Logits)].copyToHostAsync(
        logits, size_t(logitRows * cfg_.vocab) * 4, stream_));
  if (batch_->kind == ForwardKind::Decode) {
    hostStats_.resize(
        size_t(cfg_.numLayers * rows() * cfg_.qHeads * Decoder::kStatFields));
    CONDENSATE_RETURN_IF_ERROR(stats_.copyToHostAsync(
        hostStats_.data(), hostStats_.size() * 4, stream_));
    queryRows_ = rows();
    queriesFresh_ = false;
  }
  return stream_.synchronize();
}

const std::vector<float> &GPUBackend::queries() const {
  // Downloaded on demand: only studies read them.
  if (!queriesFresh_) {
    hostQueries_.resize(size_t(cfg_.numLayers * queryRows_ * cfg_.qDim()));
    if (!stream_.synchronize().ok() ||
        !queries_.copyToHost(hostQueries_.data(), hostQueries_.size() * 4).ok())
      hostQueries_.clear();
    queriesFresh_ = true;
  }
  return hostQueries_;
}

Status GPUBackend::embed(float scale) {
  cuda::KernelArgs a;
  pushMemRef(a, params_.embedding.address, {cfg_.vocab, cfg_.hidden});
  pushMemRef(a, tokens_.address(), {rows()});
  pushMemRef(a, addr(Buf::X), {rows(), cfg_.hidden});
  a.f32(scale);
  return launch("embed", {blocksFor(cfg_.hidden), unsigned(rows()), 1},
                {256, 1, 1}, a);
}

void GPUBackend::pushRounded(cuda::KernelArgs &a, Buf buf, int64_t n,
                             int64_t cols, bool round) {
  round = round && bf16Weights() && cols <= linearInputCols_;
  rounded_ = round ? Rounded{buf, n, cols} : Rounded{};
  pushMemRef(a, round ? linearInput_.address() : DevicePtr(0),
             {round ? n : 0, round ? cols : 0});
}

Status GPUBackend::rmsNorm(Buf in, const Param &weight, Buf out, Rows r,
                           bool accumulate) {
  const int64_t H = width(in), n = count(r);
  cuda::KernelArgs a;
  pushMemRef(a, addr(in) + DevicePtr(r.first * H * 4), {n, H});
  pushMemRef(a, weight.address, {H});
  pushMemRef(a, addr(out), {n, H});
  // A norm's output (not a residual it adds to) feeds a projection.
  pushRounded(a, out, n, H, !accumulate);
  a.f32(static_cast<float>(cfg_.rmsEps));
  a.i32(accumulate ? 1 : 0);
  a.i32(rounded_.rows >= 0 ? 1 : 0);
  return launch("rmsnorm", {unsigned(n), 1, 1}, {256, 1, 1}, a);
}

Status GPUBackend::headNorm(Buf qOrK, const Param &weight) {
  // The rows' heads as rows of head_dim, normalised in place.
  const int64_t D = cfg_.headDim, n = rows() * width(qOrK) / D;
  cuda::KernelArgs a;
  pushMemRef(a, addr(qOrK), {n, D});
  pushMemRef(a, weight.address, {D});
  pushMemRef(a, addr(qOrK), {n, D});
  pushRounded(a, qOrK, n, D, false);
  a.f32(static_cast<float>(cfg_.rmsEps));
  a.i32(0);
  a.i32(0);
  return launch("rmsnorm", {unsigned(n), 1, 1}, {256, 1, 1}, a);
}

Status GPUBackend::linear(Buf in, const Param &weight, const Param &bias,
                          Buf out, bool accumulate, Rows r) {
  const int64_t K = width(in), N = width(out), n = count(r);
  if (weight.size != N * K)
    return Status::error("linear: a weight of " + std::to_string(weight.size) +
                         " elements for a [" + std::to_string(N) + ", " +
                         std::to_string(K) + "] product");
  cuda::GemmOptions o;
  o.beta = accumulate ? 1.0f : 0.0f;
  DevicePtr input = addr(in) + DevicePtr(r.first * K * 4);
  // The kernel that wrote these rows also rounded them (rmsNorm,
  // activation): linearInput_ holds them already.
  const bool rounded = r.first == 0 && rounded_ == Rounded{in, n, K};
  rounded_ = Rounded{};
  if (bf16Weights() && rounded) {
    input = linearInput_.address();
  } else if (bf16Weights()) {
    // cublasGemmEx takes A and B of one type: the rows are rounded into
    // linearInput_; accumulation and output stay float32.
    if (K > linearInputCols_)
      return Status::error("linear: an input of width " + std::to_string(K) +
                           "; the bf16 scratch holds rows of " +
                           std::to_string(linearInputCols_));
    cuda::KernelArgs a;
    pushMemRef(a, input, {n, K});
    pushMemRef(a, linearInput_.address(), {n, K});
    CONDENSATE_RETURN_IF_ERROR(
        launch("round_bf16", {blocksFor(K), unsigned(n), 1}, {256, 1, 1}, a));
    input = linearInput_.address();
  }
  CONDENSATE_RETURN_IF_ERROR(blas_.gemm(int(n), int(N), int(K),
                                        bf16Weights() ? cuda::ElementType::BF16
                                                      : cuda::ElementType::F32,
                                        input, weight.address, addr(out), o));
  if (!bias.present())
    return Status::success();
  if (out == Buf::QKV && r.first == 0 && n == rows()) {
    // The split that follows adds it (one launch fewer).
    qkvBias_ = bias;
    return Status::success();
  }
  return addBias(out, bias, n);
}

Status GPUBackend::addBias(Buf out, const Param &bias, int64_t n) {
  const int64_t N = width(out);
  cuda::KernelArgs a;
  pushMemRef(a, addr(out), {n, N});
  pushMemRef(a, bias.address, {N});
  return launch("add_bias", {blocksFor(N), unsigned(n), 1}, {256, 1, 1}, a);
}

Status GPUBackend::splitQKV() {
  if (qkvBias_.present()) {
    CONDENSATE_RETURN_IF_ERROR(addBias(Buf::QKV, qkvBias_, rows()));
    qkvBias_ = Param();
  }
  cuda::KernelArgs a;
  pushMemRef(a, addr(Buf::QKV), {rows(), cfg_.qkvDim()});
  pushMemRef(a, addr(Buf::Q), {rows(), cfg_.qDim()});
  pushMemRef(a, addr(Buf::K), {rows(), cfg_.kvDim()});
  pushMemRef(a, addr(Buf::V), {rows(), cfg_.kvDim()});
  return launch("split_qkv", {blocksFor(cfg_.qkvDim()), unsigned(rows()), 1},
                {256, 1, 1}, a);
}

Status GPUBackend::rope(Buf qOrK, int64_t layer) {
  const int64_t heads = qOrK == Buf::Q ? cfg_.qHeads : cfg_.kvHeads,
                pairs = cfg_.ropeDim / 2;
  cuda::KernelArgs a;
  pushMemRef(a, addr(qOrK), {rows(), heads, cfg_.headDim});
  pushMemRef(a, positions_.address(), {rows()});
  pushMemRef(a,
             (cfg_.localLayer(layer) ? invFreqLocal_ : invFreq_).address(),
             {pairs});
  a.i32(cfg_.ropeMode == RopeMode::Adjacent ? 1 : 0);
  const unsigned threads = static_cast<unsigned>((pairs + 31) / 32 * 32);
  return launch("rope", {unsigned(heads), unsigned(rows()), 1}, {threads, 1, 1},
                a);
}

Status GPUBackend::splitRope(int64_t layer) {
  const int64_t D = cfg_.headDim, pairs = cfg_.ropeDim / 2;
  cuda::KernelArgs a;
  pushMemRef(a, addr(Buf::QKV), {rows(), cfg_.qkvDim()});
  pushMemRef(a, addr(Buf::Q), {rows(), cfg_.qHeads, D});
  pushMemRef(a, addr(Buf::K), {rows(), cfg_.kvHeads, D});
  pushMemRef(a, addr(Buf::V), {rows(), cfg_.kvHeads, D});
  pushMemRef(a, positions_.address(), {rows()});
  pushMemRef(a, (cfg_.localLayer(layer) ? invFreqLocal_ : invFreq_).address(),
             {pairs});
  a.i32(cfg_.ropeMode == RopeMode::Adjacent ? 1 : 0);
  pushMemRef(a, qkvBias_.present() ? qkvBias_.address : DevicePtr(0),
             {qkvBias_.present() ? cfg_.qkvDim() : 0});
  a.i32(qkvBias_.present() ? 1 : 0);
  qkvBias_ = Param();
  const unsigned threads = static_cast<unsigned>((D / 2 + 31) / 32 * 32);
  return launch("split_rope",
                {unsigned(cfg_.qHeads + 2 * cfg_.kvHeads), unsigned(rows()), 1},
                {threads, 1, 1}, a);
}

AppendArgs GPUBackend::appendArgs(int64_t l) const {
  AppendArgs a = pagedArgs<AppendArgs>(l);
  a.kNew = dev<const float>(addr(Buf::K));
  a.vNew = dev<const float>(addr(Buf::V));
  a.positions = dev<const int32_t>(positions_.address());
  return a;
}

Status GPUBackend::append(int64_t l) {
  // One call for every row: a prefill's rows of one page are consecutive,
  // in position order, which append_kv asks (one block appends them).
  AppendArgs a = appendArgs(l);
  if (batch_->kind == ForwardKind::Decode)
    return program_->program->append(a, stream_);
  return dense_->program->append(a, stream_);
}

AttentionArgs GPUBackend::attentionArgs(int64_t l) const {
  AttentionArgs a = pagedArgs<AttentionArgs>(l);
  a.q = dev<const float>(addr(Buf::Q));
  a.lens = dev<const int32_t>(lens_.address());
  a.windows =
      dev<const int32_t>(windows_.address() + DevicePtr(l * rows() * 4));
  a.out = dev<float>(addr(Buf::Attn));
  return a;
}

Status GPUBackend::attend(int64_t l) {
  AttentionArgs a = attentionArgs(l);
  a.stats = dev<float>(stats_.address() + DevicePtr(l * rows() * cfg_.qHeads *
                                                    Decoder::kStatFields * 4));
  const bool dense = denseDecode_ && !batch_->denseLayers.empty() &&
                     batch_->denseLayers[size_t(l)];
  return (dense ? denseDecode_ : program_)->program->attend(l, a, stream_);
}

Status GPUBackend::prefillAttend(int64_t l) {
  // The rows are consecutive positions of one sequence: one prefill call
  // with one sequence, its page-table row the first row's (begin() uploaded
  // its length and row starts to prefillRows_).
  const DeviceLayer &L = layers_[size_t(l)];
  PrefillArgs a;
  a.rows = rows();
  a.seqs = 1;
  a.maxPages = width_;
  a.numPages = numPages_;
  a.q = dev<const float>(addr(Buf::Q));
  a.kCache = dev<void>(L.k.address());
  a.vCache = dev<void>(L.v.address());
  a.pageTable = dev<const int32_t>(pageTable_.address());
  a.lens = dev<const int32_t>(prefillRows_.address());
  a.rowStarts = dev<const int32_t>(prefillRows_.address() + 4);
  a.out = dev<float>(addr(Buf::Attn));
  return dense_->program->prefill(l, a, stream_);
}

Status GPUBackend::activation(Activation kind) {
  const char *name = nullptr;
  switch (kind) {
  case Activation::SwiGLU:
    name = "silu_mul";
    break;
  case Activation::GeGLU:
    name = "gelu_mul";
    break;
  }
  if (!name)
    return Status::error("unknown activation");
  cuda::KernelArgs a;
  pushMemRef(a, addr(Buf::GU), {rows(), 2 * cfg_.ffn});
  pushMemRef(a, addr(Buf::Act), {rows(), cfg_.ffn});
  // Act feeds the down projection.
  pushRounded(a, Buf::Act, rows(), cfg_.ffn, true);
  a.i32(rounded_.rows >= 0 ? 1 : 0);
  return launch(name, {blocksFor(cfg_.ffn), unsigned(rows()), 1}, {256, 1, 1},
                a);
}

Status GPUBackend::keepQueries(int64_t l) {
  const size_t bytes = size_t(rows() * cfg_.qDim()) * 4;
  return queries_.copyFromDeviceAsync(bufs_[size_t(Buf::Q)], bytes, stream_, 0,
                                      size_t(l) * bytes);
}

} // namespace

Result<std::unique_ptr<Backend>> createGPUBackend(const BackendSetup &setup) {
  return GPUBackend::create(setup);
}

} // namespace condensate::decoder
