//===- Tune.cpp - the GPU kernels' autotuner ------------------------------===//
//
// Coordinate descent over the knobs of GPUTuning, starting at the
// compiler's defaults: each knob in turn takes each of its values with the
// others at the best found so far, and the best moves only for a gain of
// options.minGain. A candidate is compiled in-process; one whose PTX equals
// an earlier one's shares its results. Otherwise it is loaded, checked
// against the float64 reference (reference::attend, every layer, a small
// batch of random sequences) and timed cold on every workload. The record
// (JSON) keeps every candidate's times; docs/TUNING.md shows one.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Tuner.h"

#include "condensate/ABI/AttentionABI.h"
#include "condensate/Runtime/Files.h"
#include "condensate/Runtime/Reference.h"
#include "condensate/Support/BFloat16.h"

#include "CompilerId.inc"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace condensate {

Result<std::string> chipForComputeCapability(int cc) {
  if (cc >= 90)
    return std::string("sm_90");
  if (cc >= 80)
    return std::string("sm_80");
  return Status::error("the device is sm_" + std::to_string(cc) +
                       "; the GPU kernels need sm_80 or newer");
}

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Values that every KV type stores exactly: multiples of 2^-6 within
/// +-127 * 2^-6 (7 significant bits), drawn from a rounded N(0, 0.5^2).
float drawKV(std::mt19937 &rng) {
  float x = std::normal_distribution<float>(0.0f, 32.0f)(rng);
  x = std::clamp(std::nearbyint(x), -127.0f, 127.0f);
  return x / 64.0f;
}

/// The storage bits of `f`, which drawKV made exact in every type.
void storeKV(KVType t, float f, uint8_t *raw, int64_t i) {
  if (t == KVType::F32) {
    std::memcpy(raw + 4 * i, &f, 4);
    return;
  }
  uint16_t h = 0;
  if (t == KVType::BF16) {
    h = floatToBF16(f);
  } else if (f != 0.0f) {
    // A normal half: |f| in [2^-6, 2) is well inside its exponent range
    // and its 7 significant bits fit the 10 of the mantissa.
    uint32_t u;
    std::memcpy(&u, &f, 4);
    int32_t e = static_cast<int32_t>((u >> 23) & 0xff) - 127;
    h = static_cast<uint16_t>(((u >> 16) & 0x8000u) |
                              (static_cast<uint32_t>(e + 15) << 10) |
                              ((u >> 13) & 0x3ffu));
  }
  std::memcpy(raw + 2 * i, &h, 2);
}

/// Host copies of one random paged cache and its reference inputs.
struct HostCase {
  int64_t batch = 0, maxPages = 0, numPages = 0;
  std::vector<int32_t> lens, pageTable, windows;
  std::vector<float> k, v, q, summaries; // k, v as floats (exact)
  std::vector<uint8_t> kRaw, vRaw;       // as the kernels store them
};

/// Page j of sequence b is page pageTable[b * maxPages + j]: a random
/// permutation of all pages, so sequences' pages interleave.
HostCase makeCase(const ModelShape &s, const std::vector<int32_t> &lens,
                  std::mt19937 &rng) {
  HostCase c;
  c.batch = static_cast<int64_t>(lens.size());
  c.lens = lens;
  int64_t longest = *std::max_element(lens.begin(), lens.end());
  c.maxPages = (longest + s.pageSize - 1) / s.pageSize;
  c.numPages = c.batch * c.maxPages;
  std::vector<int32_t> perm(c.numPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.pageTable = perm;
  int64_t elems = c.numPages * s.kvHeads * s.pageSize * s.headDim;
  int bytes = kvTypeBytes(s.kvType);
  c.k.resize(elems);
  c.v.resize(elems);
  c.kRaw.resize(elems * bytes);
  c.vRaw.resize(elems * bytes);
  for (int64_t i = 0; i < elems; ++i) {
    c.k[i] = drawKV(rng);
    c.v[i] = drawKV(rng);
    storeKV(s.kvType, c.k[i], c.kRaw.data(), i);
    storeKV(s.kvType, c.v[i], c.vRaw.data(), i);
  }
  c.q.resize(c.batch * s.qHeads * s.headDim);
  for (float &x : c.q)
    x = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  return c;
}

reference::Inputs referenceInputs(const ModelShape &s, const HostCase &c) {
  reference::Inputs in = reference::inputsFor(s);
  in.batch = c.batch;
  in.maxPages = c.maxPages;
  in.q = c.q.data();
  in.k = c.k.data();
  in.v = c.v.data();
  in.pageTable = c.pageTable.data();
  in.lens = c.lens.data();
  in.numPages = c.numPages;
  return in;
}

/// Per sequence the window of an adaptive layer: its policies' window.
std::vector<int32_t> layerWindows(const Schedule &schedule, const ModelShape &s,
                                  int64_t layer, int64_t batch) {
  int64_t w = 0;
  for (int64_t g = 0; g < s.kvHeads; ++g) {
    const Policy &p = schedule.policyFor(layer, g);
    if (p.adaptive())
      w = std::max(w, p.window);
  }
  return std::vector<int32_t>(batch, static_cast<int32_t>(w));
}

/// Device buffers of one cache case.
struct DeviceCase {
  cuda::DeviceBuffer q, k, v, pageTable, lens, windows, summaries, out, stats;
  AttentionArgs args(const HostCase &c, bool adaptive) const {
    AttentionArgs a;
    a.batch = c.batch;
    a.maxPages = c.maxPages;
    a.numPages = c.numPages;
    auto ptr = [](const cuda::DeviceBuffer &b) {
      return reinterpret_cast<void *>(static_cast<uintptr_t>(b.address()));
    };
    a.q = static_cast<const float *>(ptr(q));
    a.kCache = ptr(k);
    a.vCache = ptr(v);
    a.pageTable = static_cast<const int32_t *>(ptr(pageTable));
    a.lens = static_cast<const int32_t *>(ptr(lens));
    a.windows = adaptive ? static_cast<const int32_t *>(ptr(windows)) : nullptr;
    a.summaries = static_cast<const float *>(ptr(summaries));
    a.out = static_cast<float *>(ptr(out));
    a.stats = static_cast<float *>(ptr(stats));
    return a;
  }
};

template <typename T>
Result<cuda::DeviceBuffer> uploadVector(const std::vector<T> &host) {
  auto buf = cuda::DeviceBuffer::allocate(std::max<size_t>(1, host.size()) *
                                          sizeof(T));
  if (!buf.ok())
    return buf.status();
  if (!host.empty())
    CONDENSATE_RETURN_IF_ERROR(buf->upload(host));
  return buf;
}

/// Checks every layer of `program` against reference::attend on a random
/// batch (a short and a longer sequence); returns the worst relative error
/// of a head, or an error naming the first head past `tolerance`.
Result<double> checkAgainstReference(GPUProgram &program,
                                     const Schedule &schedule,
                                     const cuda::Stream &stream,
                                     std::mt19937 &rng) {
  const ModelShape &s = program.shape();
  const double tolerance = 1e-3;
  int32_t P = static_cast<int32_t>(s.pageSize);
  HostCase c =
      makeCase(s, {3 * P + 5, std::max<int32_t>(1200, 9 * P + 1)}, rng);
  reference::Inputs in = referenceInputs(s, c);
  c.summaries = reference::summaries(in, c.numPages, s.sketchBits);
  in.summaries = c.summaries.data();
  CONDENSATE_RETURN_IF_ERROR(program.reserve(c.batch, c.maxPages, c.numPages));
  DeviceCase d;
#define CONDENSATE_UPLOAD(field, host)                                         \
  {                                                                            \
    auto b = uploadVector(host);                                               \
    if (!b.ok())                                                               \
      return b.status();                                                       \
    d.field = b.take();                                                        \
  }
  CONDENSATE_UPLOAD(q, c.q)
  CONDENSATE_UPLOAD(k, c.kRaw)
  CONDENSATE_UPLOAD(v, c.vRaw)
  CONDENSATE_UPLOAD(pageTable, c.pageTable)
  CONDENSATE_UPLOAD(lens, c.lens)
  CONDENSATE_UPLOAD(summaries, c.summaries)
  const int64_t W = kAttentionStatsWidth, D = s.headDim, Hq = s.qHeads;
  const int64_t group = s.group();
  std::vector<float> out(c.batch * Hq * D), stats(c.batch * Hq * W);
  CONDENSATE_UPLOAD(out, out)
  CONDENSATE_UPLOAD(stats, stats)
  double worst = 0.0;
  for (int64_t layer = 0; layer < s.numLayers; ++layer) {
    bool adaptive = program.isAdaptive(layer);
    std::vector<int32_t> windows = layerWindows(schedule, s, layer, c.batch);
    CONDENSATE_UPLOAD(windows, windows)
    // Poisoned outputs: a head the kernels leave unwritten stays NaN.
    CONDENSATE_RETURN_IF_ERROR(
        d.out.memsetD32Async(0x7fc00000u, out.size(), stream));
    CONDENSATE_RETURN_IF_ERROR(
        d.stats.memsetD32Async(0x7fc00000u, stats.size(), stream));
    CONDENSATE_RETURN_IF_ERROR(
        program.attend(layer, d.args(c, adaptive), stream));
    CONDENSATE_RETURN_IF_ERROR(stream.synchronize());
    CONDENSATE_RETURN_IF_ERROR(d.out.download(out));
    CONDENSATE_RETURN_IF_ERROR(d.stats.download(stats));
    std::vector<Policy> policies;
    for (int64_t g = 0; g < s.kvHeads; ++g)
      policies.push_back(schedule.policyFor(layer, g));
    in.windows = adaptive ? windows.data() : nullptr;
    // The reference evaluated on the kernel's certificate decisions.
    std::vector<reference::Decision> decisions =
        reference::decisionsFromStats(stats.data(), c.batch, Hq, s.kvHeads);
    reference::Output ref = reference::attend(in, policies, &decisions);
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        int64_t g = h / group;
        if (reference::selectionMayDiffer(ref, policies[g], b, g, s.kvHeads))
          continue;
        const float *o = out.data() + (b * Hq + h) * D;
        const double *r = ref.out.data() + (b * Hq + h) * D;
        double num = 0.0, den = 0.0;
        for (int64_t ch = 0; ch < D; ++ch) {
          if (!std::isfinite(o[ch]))
            return Status::error("layer " + std::to_string(layer) +
                                 " sequence " + std::to_string(b) + " head " +
                                 std::to_string(h) +
                                 ": output not written or not finite");
          num += (o[ch] - r[ch]) * (o[ch] - r[ch]);
          den += r[ch] * r[ch];
        }
        double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
        worst = std::max(worst, rel);
        if (!(rel <= tolerance))
          return Status::error("layer " + std::to_string(layer) + " sequence " +
                               std::to_string(b) + " head " +
                               std::to_string(h) + ": relative error " +
                               std::to_string(rel) +
                               " against the float64 reference (tolerance " +
                               std::to_string(tolerance) + ")");
      }
  }
#undef CONDENSATE_UPLOAD
  return worst;
}

/// Copies of a small workload beyond this add graph nodes, not coldness.
constexpr int64_t kMaxCopies = 512;

/// The device memory of one workload: `copies` distinct caches (pages
/// tiled from one random block), each with its queries and outputs.
struct Workload {
  TuneWorkload w;
  HostCase shapeOnly; // batch, lens, maxPages, numPages; page tables per copy
  std::vector<DeviceCase> copies;
  std::vector<std::vector<int32_t>> tables;
  int64_t bytesPerCopy = 0;
};

/// Builds the cold copies of workload `w` (see TuneOptions::coldFactor),
/// all filled from one random block of pages (content does not change a
/// kernel's time; distinct addresses do).
Result<Workload> makeWorkload(const ModelShape &s, const TuneWorkload &w,
                              const cuda::DeviceProperties &props,
                              const cuda::Context &context, double coldFactor,
                              std::mt19937 &rng) {
  Workload wl;
  wl.w = w;
  HostCase &c = wl.shapeOnly;
  c.batch = w.batch;
  c.lens.assign(w.batch, static_cast<int32_t>(w.context));
  c.maxPages = (w.context + s.pageSize - 1) / s.pageSize;
  c.numPages = c.batch * c.maxPages;
  int64_t rows = abi::summaryRows(s.pageSize, s.sketchBits);
  int64_t pageKV = s.kvHeads * s.pageSize * s.headDim * kvTypeBytes(s.kvType);
  int64_t pageSummary = s.kvHeads * rows * s.headDim * 4;
  wl.bytesPerCopy = c.numPages * (2 * pageKV + pageSummary);
  int64_t copies = std::max<int64_t>(
      2, static_cast<int64_t>(std::ceil(coldFactor * props.l2CacheBytes /
                                        double(wl.bytesPerCopy))));
  copies = std::max(copies, s.numLayers); // every layer timed at least once
  copies = std::min<int64_t>(copies, kMaxCopies);
  auto mem = context.memoryInfo();
  if (!mem.ok())
    return mem.status();
  double usable = 0.8 * static_cast<double>(mem->first);
  if (2.0 * wl.bytesPerCopy > usable)
    return Status::error("workload batch " + std::to_string(w.batch) + " x " +
                         std::to_string(w.context) + " tokens needs " +
                         std::to_string(2.0 * wl.bytesPerCopy / 1e9) +
                         " GB for two cold copies; the device has " +
                         std::to_string(mem->first / 1e9) + " GB free");
  copies =
      std::min<int64_t>(copies, static_cast<int64_t>(usable / wl.bytesPerCopy));
  // One random block of pages: the first tilePages pages of every copy,
  // repeated.
  int64_t tilePages = std::clamp<int64_t>((32ll << 20) / pageKV, 1, c.numPages);
  HostCase tile =
      makeCase(s, {static_cast<int32_t>(tilePages * s.pageSize)}, rng);
  std::iota(tile.pageTable.begin(), tile.pageTable.end(), 0);
  reference::Inputs in = referenceInputs(s, tile);
  std::vector<float> tileSummaries =
      reference::summaries(in, tile.numPages, s.sketchBits);
  for (int64_t i = 0; i < copies; ++i) {
    DeviceCase d;
    std::vector<int32_t> perm(c.numPages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<float> q(c.batch * s.qHeads * s.headDim);
    for (float &x : q)
      x = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    std::vector<int32_t> windows(c.batch, 0);
    auto alloc = [](cuda::DeviceBuffer &b, int64_t bytes) -> Status {
      auto r = cuda::DeviceBuffer::allocate(static_cast<size_t>(bytes));
      if (!r.ok())
        return r.status();
      b = r.take();
      return Status::success();
    };
    CONDENSATE_RETURN_IF_ERROR(alloc(d.k, c.numPages * pageKV));
    CONDENSATE_RETURN_IF_ERROR(alloc(d.v, c.numPages * pageKV));
    CONDENSATE_RETURN_IF_ERROR(alloc(d.summaries, c.numPages * pageSummary));
    for (int64_t p0 = 0; p0 < c.numPages; p0 += tilePages) {
      int64_t n = std::min(tilePages, c.numPages - p0);
      CONDENSATE_RETURN_IF_ERROR(
          d.k.copyFromHost(tile.kRaw.data(), n * pageKV, p0 * pageKV));
      CONDENSATE_RETURN_IF_ERROR(
          d.v.copyFromHost(tile.vRaw.data(), n * pageKV, p0 * pageKV));
      CONDENSATE_RETURN_IF_ERROR(d.summaries.copyFromHost(
          tileSummaries.data(), n * pageSummary, p0 * pageSummary));
    }
    std::vector<float> zeros(
        c.batch * s.qHeads *
        std::max<int64_t>(s.headDim, kAttentionStatsWidth));
    for (auto [buf, host] : {std::pair{&d.q, &q}, std::pair{&d.out, &zeros},
                             std::pair{&d.stats, &zeros}}) {
      auto b = uploadVector(*host);
      if (!b.ok())
        return b.status();
      *buf = b.take();
    }
    for (auto [buf, host] :
         {std::pair{&d.pageTable, &perm}, std::pair{&d.lens, &c.lens},
          std::pair{&d.windows, &windows}}) {
      auto b = uploadVector(*host);
      if (!b.ok())
        return b.status();
      *buf = b.take();
    }
    wl.tables.push_back(perm);
    wl.copies.push_back(std::move(d));
  }
  return wl;
}

/// Median device time of one layer call on workload `wl`, microseconds:
/// copy i runs layer i % layers; all copies' calls form one graph.
Result<double> timeWorkload(GPUProgram &program, const Schedule &schedule,
                            Workload &wl, const cuda::Stream &stream,
                            int replays) {
  const ModelShape &s = program.shape();
  const HostCase &c = wl.shapeOnly;
  CONDENSATE_RETURN_IF_ERROR(program.reserve(c.batch, c.maxPages, c.numPages));
  int64_t copies = static_cast<int64_t>(wl.copies.size());
  for (int64_t i = 0; i < copies; ++i) {
    int64_t layer = i % s.numLayers;
    std::vector<int32_t> windows = layerWindows(schedule, s, layer, c.batch);
    CONDENSATE_RETURN_IF_ERROR(wl.copies[i].windows.upload(windows));
  }
  // One eager round first: errors surface with their layer, and lazy
  // module loading happens outside the capture.
  for (int64_t i = 0; i < copies; ++i) {
    int64_t layer = i % s.numLayers;
    CONDENSATE_RETURN_IF_ERROR(program.attend(
        layer, wl.copies[i].args(c, program.isAdaptive(layer)), stream));
  }
  CONDENSATE_RETURN_IF_ERROR(stream.synchronize());
  auto capture = cuda::StreamCapture::begin(stream);
  if (!capture.ok())
    return capture.status();
  for (int64_t i = 0; i < copies; ++i) {
    int64_t layer = i % s.numLayers;
    CONDENSATE_RETURN_IF_ERROR(program.attend(
        layer, wl.copies[i].args(c, program.isAdaptive(layer)), stream));
  }
  auto graph = capture->end();
  if (!graph.ok())
    return graph.status();
  auto exec = graph->instantiate();
  if (!exec.ok())
    return exec.status();
  CONDENSATE_RETURN_IF_ERROR(exec->upload(stream));
  auto start = cuda::Event::create();
  auto end = cuda::Event::create();
  if (!start.ok())
    return start.status();
  if (!end.ok())
    return end.status();
  std::vector<double> times;
  for (int r = 0; r < replays + 3; ++r) {
    CONDENSATE_RETURN_IF_ERROR(start->record(stream));
    CONDENSATE_RETURN_IF_ERROR(exec->launch(stream));
    CONDENSATE_RETURN_IF_ERROR(end->record(stream));
    CONDENSATE_RETURN_IF_ERROR(end->synchronize());
    auto ms = cuda::Event::elapsedMs(*start, *end);
    if (!ms.ok())
      return ms.status();
    if (r >= 3) // warm-up replays are not counted
      times.push_back(*ms * 1000.0 / static_cast<double>(copies));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// The values each knob takes in the search (0: the compiler's choice).
struct Knob {
  const char *name;
  std::vector<int64_t> values;
  void (*set)(GPUTuning &, int64_t);
};

std::vector<Knob> searchSpace() {
  return {
      {"tensor-cores",
       {1, 0},
       [](GPUTuning &t, int64_t v) { t.tensorCores = v != 0; }},
      {"attend-warps",
       {0, 2, 8},
       [](GPUTuning &t, int64_t v) { t.attendWarps = v; }},
      // 0 (the rule: one tile prefetched in registers, as 1, at head_dim
      // 64 and 128; a ring of 2, as 2, at 256, where 1 means lane groups
      // of CUDA cores); 2-4: cp.async rings. Models whose attention runs
      // on CUDA cores compile the same PTX for every value.
      {"attend-stages",
       {0, 1, 2, 3, 4},
       [](GPUTuning &t, int64_t v) { t.attendStages = v; }},
      {"dense-splits",
       {0, 32, 64, 128, 256, 512},
       [](GPUTuning &t, int64_t v) { t.denseSplits = v; }},
      {"splits",
       {0, 1, 2, 4, 8, 16},
       [](GPUTuning &t, int64_t v) { t.sparseSplits = v; }},
      // Models without key sketches compile the same PTX for every value
      // and are not timed again.
      {"sketch-occupancy",
       {0, 16, 24},
       [](GPUTuning &t, int64_t v) { t.sketchOccupancy = v; }},
      // Resident warps an SM the attention kernels are built for: 12 is
      // 3 blocks of 4 warps (168 registers a thread), 20 is 5.
      {"attend-occupancy",
       {0, 12, 16, 20},
       [](GPUTuning &t, int64_t v) { t.attendOccupancy = v; }},
  };
}

json candidateJSON(const TuneCandidate &c) {
  json j = {{"knobs", json::parse(c.tuning.toJSON())},
            {"compile_seconds", c.compileSeconds}};
  if (!c.error.empty())
    j["error"] = c.error;
  if (c.sameAs >= 0)
    j["same_ptx_as"] = c.sameAs;
  if (c.error.empty()) {
    j["worst_rel_error"] = c.worstRelError;
    j["us_per_layer"] = c.microseconds;
    j["geomean_us"] = c.score;
  }
  return j;
}

} // namespace

Result<TuneResult> tuneGPULibrary(const ModelShape &shapeIn,
                                  const Schedule &schedule,
                                  const TuneOptions &options) {
  auto t0 = Clock::now();
  CONDENSATE_RETURN_IF_ERROR(shapeIn.validate());
  CONDENSATE_RETURN_IF_ERROR(schedule.validate());
  auto full = cacheShapeFor(shapeIn, schedule);
  if (!full.ok())
    return full.status();
  const ModelShape shape = *full;
  if (options.workloads.empty())
    return Status::error("tune: no workloads");
  for (const TuneWorkload &w : options.workloads)
    if (w.batch < 1 || w.batch > 4096 || w.context < 1 ||
        w.context > (int64_t(1) << 24))
      return Status::error("tune: workload batch " + std::to_string(w.batch) +
                           " x " + std::to_string(w.context) +
                           " tokens is out of range (batch in [1, 4096], "
                           "context in [1, 16777216])");
  if (options.replays < 1 || options.replays > 10000)
    return Status::error("tune: replays must be in [1, 10000]");
  auto driver = cuda::Driver::get();
  if (!driver.ok())
    return driver.status();
  if (options.device < 0 || options.device >= (*driver)->deviceCount())
    return Status::error("tune: no device " + std::to_string(options.device));
  auto props = (*driver)->deviceProperties(options.device);
  if (!props.ok())
    return props.status();
  auto chip = chipForComputeCapability(props->computeCapability());
  if (!chip.ok())
    return chip.status();
  auto context = cuda::Context::primary(options.device);
  if (!context.ok())
    return context.status();
  CONDENSATE_RETURN_IF_ERROR(context->makeCurrent());
  auto stream = cuda::Stream::create();
  if (!stream.ok())
    return stream.status();

  TuneResult result;
  result.chip = *chip;
  result.device = props->name;
  result.workloads = options.workloads;
  std::mt19937 rng(std::random_device{}());
  std::vector<Workload> workloads;
  for (const TuneWorkload &w : options.workloads) {
    auto wl = makeWorkload(shape, w, *props, *context, options.coldFactor, rng);
    if (!wl.ok())
      return wl.status();
    result.copies.push_back(static_cast<int64_t>(wl->copies.size()));
    result.bytesPerCopy.push_back(wl->bytesPerCopy);
    workloads.push_back(wl.take());
  }

  std::vector<Knob> knobs = searchSpace();
  size_t total = 1;
  for (const Knob &k : knobs)
    total += k.values.size() - 1;
  std::vector<std::string> ptxs;
  auto evaluate = [&](const GPUTuning &t) -> size_t {
    for (size_t i = 0; i < result.candidates.size(); ++i)
      if (result.candidates[i].tuning == t)
        return i;
    if (options.progress)
      options.progress(result.candidates.size(), total, t.options());
    TuneCandidate c;
    c.tuning = t;
    auto tc = Clock::now();
    auto lib = compileGPULibrary(shape, schedule, result.chip, t);
    c.compileSeconds = secondsSince(tc);
    if (!lib.ok()) {
      c.error = "compile: " + lib.message();
      ptxs.emplace_back();
      result.candidates.push_back(c);
      return result.candidates.size() - 1;
    }
    for (size_t i = 0; i < ptxs.size(); ++i)
      if (!ptxs[i].empty() && ptxs[i] == lib->ptx) {
        TuneCandidate shared = result.candidates[i];
        shared.tuning = t;
        shared.sameAs = static_cast<int>(i);
        shared.compileSeconds = c.compileSeconds;
        ptxs.emplace_back();
        result.candidates.push_back(shared);
        return result.candidates.size() - 1;
      }
    ptxs.push_back(lib->ptx);
    auto program = GPUProgram::load(
        std::make_shared<const GPULibrary>(lib.take()), options.device);
    Status st = program.ok() ? Status::success() : program.status();
    if (st.ok()) {
      auto checked = checkAgainstReference(**program, schedule, *stream, rng);
      if (checked.ok())
        c.worstRelError = *checked;
      else
        st = checked.status().withContext("reference check");
    }
    for (size_t w = 0; st.ok() && w < workloads.size(); ++w) {
      auto us = timeWorkload(**program, schedule, workloads[w], *stream,
                             options.replays);
      if (us.ok())
        c.microseconds.push_back(*us);
      else
        st = us.status().withContext("timing");
    }
    if (!st.ok()) {
      c.error = st.message();
      // Leave the stream usable for the next candidate.
      (void)stream->synchronize();
    } else {
      double logSum = 0.0;
      for (double us : c.microseconds)
        logSum += std::log(us);
      c.score = std::exp(logSum / static_cast<double>(c.microseconds.size()));
    }
    result.candidates.push_back(c);
    return result.candidates.size() - 1;
  };

  size_t best = evaluate(GPUTuning{});
  if (!result.candidates[best].error.empty())
    return Status::error("tune: the default kernels fail: " +
                         result.candidates[best].error);
  for (const Knob &k : knobs)
    for (int64_t v : k.values) {
      GPUTuning t = result.candidates[best].tuning;
      k.set(t, v);
      size_t i = evaluate(t);
      if (result.candidates[i].score <
          result.candidates[best].score * (1.0 - options.minGain))
        best = i;
    }
  result.best = best;
  if (options.progress)
    options.progress(total, total, "done");
  result.seconds = secondsSince(t0);

  json record;
  record["condensate_tuning"] = 1;
  record["compiler"] = CONDENSATE_COMPILER_ID;
  record["chip"] = result.chip;
  record["device"] = result.device;
  record["model_mlir"] = tuningModelText(shape, schedule);
  json ws = json::array();
  for (size_t i = 0; i < result.workloads.size(); ++i)
    ws.push_back({{"batch", result.workloads[i].batch},
                  {"context", result.workloads[i].context},
                  {"copies", result.copies[i]},
                  {"bytes_per_copy", result.bytesPerCopy[i]}});
  record["workloads"] = ws;
  record["method"] =
      "per workload: median of " + std::to_string(options.replays) +
      " replays of one CUDA graph calling every copy (distinct caches, "
      "copies until they exceed " +
      std::to_string(options.coldFactor) + "x L2, at most " +
      std::to_string(kMaxCopies) +
      "), per layer call; score: geometric mean over workloads";
  record["best"] = json::parse(result.candidates[best].tuning.toJSON());
  record["default"] = json::parse(GPUTuning{}.toJSON());
  record["speedup_over_default"] =
      result.candidates[0].score / result.candidates[best].score;
  json cs = json::array();
  for (const TuneCandidate &c : result.candidates)
    cs.push_back(candidateJSON(c));
  record["candidates"] = cs;
  record["seconds"] = result.seconds;
  result.record = record.dump(1);
  if (!options.cacheDir.empty()) {
    CONDENSATE_RETURN_IF_ERROR(makeDirectories(options.cacheDir));
    result.recordPath = options.cacheDir + "/" +
                        tuningRecordKey(shape, schedule, result.chip) +
                        ".tune.json";
    CONDENSATE_RETURN_IF_ERROR(
        writeFileAtomic(result.recordPath, result.record + "\n"));
  }
  return result;
}

} // namespace condensate
