//===- Decoder.cpp - Sequences, argument checks and forward passes --------===//
//
// The backend-independent half of the decoder: it validates the options,
// creates the backend, keeps the sequences' pages (PagePool), checks every
// call's arguments before anything changes, and turns prefill chunks and
// decode steps into ForwardBatches for the recipe.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Decoder.h"

#include "Backend.h"
#include "PagePool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>

namespace condensate::decoder {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

} // namespace

const char *weightTypeName(WeightType t) {
  switch (t) {
  case WeightType::F32:
    return "f32";
  case WeightType::BF16:
    return "bf16";
  }
  return "?";
}

Result<WeightType> parseWeightType(const std::string &name) {
  for (WeightType t : {WeightType::F32, WeightType::BF16})
    if (name == weightTypeName(t))
      return t;
  return Status::error("weight type must be f32 or bf16, got '" + name + "'");
}

Result<int64_t> schedulePageSize(const Schedule &schedule) {
  int64_t size = 0;
  auto visit = [&](const Policy &p) -> Status {
    if (p.dense)
      return Status::success();
    if (size && p.pageSize != size)
      return Status::error("the schedule mixes page sizes " +
                           std::to_string(size) + " and " +
                           std::to_string(p.pageSize));
    size = p.pageSize;
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(visit(schedule.defaultPolicy));
  for (const ScheduleRule &r : schedule.rules)
    CONDENSATE_RETURN_IF_ERROR(visit(r.policy));
  return size;
}

Schedule withPageSize(Schedule schedule, int64_t pageSize) {
  if (!schedule.defaultPolicy.dense)
    schedule.defaultPolicy.pageSize = pageSize;
  for (ScheduleRule &r : schedule.rules)
    if (!r.policy.dense)
      r.policy.pageSize = pageSize;
  return schedule;
}

Schedule withModelRoles(const ModelConfig &config, Schedule schedule,
                        int64_t pageSize) {
  ScheduleRule local;
  for (int64_t l = 0; l < config.numLayers; ++l)
    if (config.localLayer(l))
      local.layers.push_back(l);
  if (local.layers.empty())
    return schedule;
  local.policy.anchor = 0;
  local.policy.window = local.policy.windowMax = config.slidingWindow;
  local.policy.pageSize = pageSize;
  schedule.rules.push_back(std::move(local)); // later rules win
  return schedule;
}

Schedule prefillSchedule(const ModelConfig &config, int64_t prefillWindow,
                         int64_t pageSize) {
  Schedule prefill = Schedule::uniform(config.numLayers, Policy::makeDense());
  if (prefillWindow > 0) {
    Policy window;
    window.anchor = 0;
    window.window = window.windowMax = prefillWindow;
    window.pageSize = pageSize;
    prefill = Schedule::uniform(config.numLayers, window);
  }
  return withModelRoles(config, std::move(prefill), pageSize);
}

int32_t layerWindow(const Schedule &schedule, int64_t layer, int64_t kvHeads,
                    double repScore) {
  for (int64_t g = 0; g < kvHeads; ++g) {
    const Policy &p = schedule.policyFor(layer, g);
    if (p.adaptive())
      return int32_t(p.windowFor(repScore));
  }
  return 0;
}

struct Decoder::Impl {
  std::shared_ptr<const ModelWeights> weights;
  ModelConfig cfg;
  ModelShape shape;
  DecoderOptions options;
  std::unique_ptr<Backend> backend;
  PagePool pool;
  /// The longest page-table row a sequence can have.
  int64_t maxTablePages = 0;
  ForwardBatch stepBatch, prefillBatch;
  std::vector<double> rep;
  StepProfile profile, prefillProfile;
  /// DecoderOptions::fallbackMemory's state for one program: decode steps
  /// since its layers were last tried (-1: try them at the next step) and
  /// the layers that trial sent to dense attention.
  struct FallbackMemory {
    /// The program it is for (a freed program's entry is dropped, so a
    /// new one at its address starts afresh).
    std::weak_ptr<const AttentionProgram> program;
    int64_t sinceTrial = -1;
    std::vector<uint8_t> dense;
  };
  /// Per program (Batch switches programs between steps).
  std::map<const AttentionProgram *, FallbackMemory> memory;

  /// The fallback memory of the current program.
  FallbackMemory &memoryOf(const std::shared_ptr<const AttentionProgram> &p) {
    auto it = memory.find(p.get());
    if (it != memory.end() && it->second.program.lock() == p)
      return it->second;
    for (auto m = memory.begin(); m != memory.end();) {
      if (m->second.program.expired())
        m = memory.erase(m);
      else
        ++m;
    }
    FallbackMemory &m = memory[p.get()];
    m = FallbackMemory{p, -1, {}};
    return m;
  }

  /// Whether the fallback memory may run layer `l` of `schedule` dense:
  /// every head dense or certified, one at least certified (running an
  /// uncertified sparse head dense would change what it computes).
  bool memoryLayer(const Schedule &schedule, int64_t l) const {
    bool certified = false;
    for (int64_t g = 0; g < cfg.kvHeads; ++g) {
      const Policy &p = schedule.policyFor(l, g);
      if (!p.dense && !p.certified())
        return false;
      certified |= p.certified();
    }
    return certified;
  }
  /// After a trial step: the layers whose certified attention read at
  /// least the bytes dense attention would, over the batch.
  void rememberFallbacks(const Schedule &schedule, const float *stats,
                         const int32_t *lens, int64_t B, FallbackMemory &m) {
    const int64_t L = cfg.numLayers, hq = cfg.qHeads, group = shape.group();
    m.dense.assign(size_t(L), 0);
    for (int64_t l = 0; l < L; ++l) {
      if (!memoryLayer(schedule, l))
        continue;
      double read = 0.0, dense = 0.0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < hq; ++h) {
          const float *row =
              stats + ((l * B + b) * hq + h) * Decoder::kStatFields;
          read +=
              bytesRead(schedule.policyFor(l, h / group), shape, lens[b], row);
          dense += double(abi::denseBytes(lens[b], cfg.headDim,
                                          kvTypeBytes(shape.kvType))) /
                   double(group);
        }
      m.dense[size_t(l)] = read >= dense;
    }
  }

  Impl(int64_t numPages, int64_t pageSize) : pool(numPages, pageSize) {}

  Status checkToken(int32_t t) const {
    if (t < 0 || t >= cfg.vocab)
      return Status::error("token id " + std::to_string(t) + " outside [0, " +
                           std::to_string(cfg.vocab) + ")");
    return Status::success();
  }
  /// Sizes `b` for `rows` rows of `width` page-table entries.
  static void resize(ForwardBatch &b, ForwardKind kind, int64_t rows,
                     int64_t width) {
    b.kind = kind;
    b.rows = rows;
    b.tableWidth = width;
    b.tokens.resize(size_t(rows));
    b.positions.resize(size_t(rows));
    b.lens.resize(size_t(rows));
    b.pageTable.resize(size_t(rows * width));
  }
  Status checkPageSize(const Schedule &schedule) const {
    Result<int64_t> page = schedulePageSize(schedule);
    if (!page)
      return page.status();
    if (*page && *page != shape.pageSize)
      return Status::error("the schedule's page_size " + std::to_string(*page) +
                           " differs from the "
                           "decoder's " +
                           std::to_string(shape.pageSize));
    return Status::success();
  }
};

Decoder::Decoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decoder::~Decoder() = default;

Result<std::unique_ptr<Decoder>>
Decoder::create(std::shared_ptr<const ModelWeights> weights,
                const Schedule &schedule, const DecoderOptions &optionsIn) {
  DecoderOptions options = optionsIn;
  if (!weights)
    return Status::error("Decoder: no weights");
  const ModelConfig &cfg = weights->config();
  if (schedule.numLayers != cfg.numLayers)
    return Status::error(
        "the schedule is for " + std::to_string(schedule.numLayers) +
        " layers but the model has " + std::to_string(cfg.numLayers));
  Result<int64_t> schedulePage = schedulePageSize(schedule);
  if (!schedulePage)
    return schedulePage.status();
  const bool gpu = options.backend == BackendKind::GPU;
  const int64_t pageSize =
      options.pageSize ? options.pageSize
                       : (*schedulePage ? *schedulePage : (gpu ? 64 : 16));
  if (*schedulePage && *schedulePage != pageSize)
    return Status::error("page size " + std::to_string(pageSize) +
                         " differs from the schedule's page_size " +
                         std::to_string(*schedulePage));
  if (options.prefillChunk < 0)
    return Status::error("prefillChunk must be >= 0 (0: the backend's "
                         "default)");
  // Prefill rows per chunk: a GPU needs many to fill its SMs (the prefill
  // kernel has a block per tile of rows and key/value head).
  if (options.prefillChunk == 0)
    options.prefillChunk = gpu ? 2048 : 256;
  if (options.maxBatch <= 0)
    return Status::error("maxBatch must be > 0");
  if (options.prefillWindow < 0)
    return Status::error("prefillWindow must be >= 0");
  if (options.fallbackMemory < 0)
    return Status::error("fallbackMemory must be >= 0 (0: off)");
  if (!gpu && options.weightType != WeightType::F32)
    return Status::error(
        std::string("weight type ") + weightTypeName(options.weightType) +
        " is for the GPU backend; the CPU holds the weights as loaded");

  BackendSetup setup;
  setup.weights = weights;
  setup.schedule = withModelRoles(cfg, schedule, pageSize);
  setup.prefill = prefillSchedule(cfg, options.prefillWindow, pageSize);
  if (options.fallbackMemory > 0)
    setup.dense = withModelRoles(
        cfg, Schedule::uniform(cfg.numLayers, Policy::makeDense()), pageSize);
  setup.options = options;
  ModelShape &shape = setup.shape;
  shape.numLayers = cfg.numLayers;
  shape.qHeads = cfg.qHeads;
  shape.kvHeads = cfg.kvHeads;
  shape.headDim = cfg.headDim;
  shape.pageSize = pageSize;
  shape.kvType = options.kvType;
  shape.scale = cfg.attentionScale;
  // The sparse and the dense programs share the cache: one summary layout.
  shape.sketchBits = options.sketchBits;
  {
    Result<ModelShape> cache = cacheShapeFor(shape, setup.schedule);
    if (!cache)
      return cache.status();
    shape = *cache;
  }
  CONDENSATE_RETURN_IF_ERROR(shape.validate().withContext("model shape"));

  const int64_t maxTokens =
      options.maxTokens > 0
          ? options.maxTokens
          : (cfg.contextLength > 0 ? cfg.contextLength : 4096);
  const int64_t numPages =
      std::max<int64_t>(1, (maxTokens + pageSize - 1) / pageSize);
  if (numPages > std::numeric_limits<int32_t>::max())
    return Status::error("maxTokens " + std::to_string(maxTokens) +
                         " needs more pages than an i32 page table holds");
  setup.numPages = numPages;
  setup.maxTablePages =
      cfg.contextLength > 0
          ? std::min(numPages, (cfg.contextLength + pageSize - 1) / pageSize)
          : numPages;

  auto impl = std::make_unique<Impl>(numPages, pageSize);
  impl->weights = std::move(weights);
  impl->cfg = cfg;
  impl->shape = shape;
  impl->options = options;
  impl->maxTablePages = setup.maxTablePages;
  auto backend = gpu ? createGPUBackend(setup) : createCPUBackend(setup);
  if (!backend)
    return backend.status();
  impl->backend = backend.take();
  return std::unique_ptr<Decoder>(new Decoder(std::move(impl)));
}

const ModelConfig &Decoder::config() const { return impl_->cfg; }
const ModelShape &Decoder::shape() const { return impl_->shape; }
const DecoderOptions &Decoder::options() const { return impl_->options; }
std::string Decoder::memoryUse() const { return impl_->backend->memoryUse(); }
std::string Decoder::deviceDescription() const {
  return impl_->backend->description();
}
const WeightFootprint &Decoder::weightFootprint() const {
  return impl_->backend->weightFootprint();
}
double Decoder::compileSeconds() const {
  return impl_->backend->compileSeconds();
}

std::shared_ptr<const AttentionProgram> Decoder::program() const {
  return impl_->backend->program();
}
const Schedule &Decoder::schedule() const {
  return impl_->backend->program()->schedule();
}

Result<std::shared_ptr<const AttentionProgram>>
Decoder::compile(const Schedule &schedule) const {
  if (schedule.numLayers != impl_->cfg.numLayers)
    return Status::error(
        "the schedule is for " + std::to_string(schedule.numLayers) +
        " layers but the model has " + std::to_string(impl_->cfg.numLayers));
  CONDENSATE_RETURN_IF_ERROR(impl_->checkPageSize(schedule));
  if (int64_t bits = schedule.sketchBits();
      bits != 0 && bits != impl_->shape.sketchBits)
    return Status::error(
        "the schedule's sketch policies use " + std::to_string(bits) +
        " bits but the decoder's cache carries " +
        (impl_->shape.sketchBits
             ? std::to_string(impl_->shape.sketchBits) + "-bit sketches"
             : std::string("none (set DecoderOptions::sketchBits)")));
  return impl_->backend->compile(
      withModelRoles(impl_->cfg, schedule, impl_->shape.pageSize));
}

Status Decoder::setProgram(std::shared_ptr<const AttentionProgram> program) {
  if (!program)
    return Status::error("setProgram: null program");
  return impl_->backend->setProgram(std::move(program));
}

Decoder::SeqId Decoder::newSequence() { return impl_->pool.create(); }

Result<Decoder::SeqId> Decoder::fork(SeqId id, bool shareFullPages) {
  Backend &be = *impl_->backend;
  return impl_->pool.fork(
      id, [&](int32_t from, int32_t to) { return be.copyPage(from, to); },
      shareFullPages);
}

Status Decoder::release(SeqId id) { return impl_->pool.release(id); }

int64_t Decoder::length(SeqId id) const {
  const PagePool::Sequence *s = impl_->pool.find(id);
  return s ? int64_t(s->tokens.size()) : -1;
}

const std::vector<int32_t> &Decoder::tokens(SeqId id) const {
  static const std::vector<int32_t> none;
  const PagePool::Sequence *s = impl_->pool.find(id);
  return s ? s->tokens : none;
}

const std::vector<int32_t> &Decoder::pages(SeqId id) const {
  static const std::vector<int32_t> none;
  const PagePool::Sequence *s = impl_->pool.find(id);
  return s ? s->pages : none;
}

int64_t Decoder::freePages() const { return impl_->pool.freePages(); }
int64_t Decoder::totalPages() const { return impl_->pool.numPages(); }

Decoder::CacheView Decoder::cache(int64_t layer) const {
  return impl_->backend->cache(layer);
}

Status Decoder::prefill(SeqId id, const int32_t *tokens, int64_t count,
                        float *lastLogits, std::vector<float> *allLogits,
                        const ProgressFn &progress) {
  Impl &d = *impl_;
  CONDENSATE_RETURN_IF_ERROR(d.pool.check(id));
  if (count <= 0)
    return Status::error("prefill: no tokens");
  for (int64_t i = 0; i < count; ++i)
    CONDENSATE_RETURN_IF_ERROR(d.checkToken(tokens[i]).withContext("prefill"));
  CONDENSATE_RETURN_IF_ERROR(
      d.pool.checkGrowth(&id, 1, count, d.cfg.contextLength));

  const int64_t p0 = length(id), V = d.cfg.vocab;
  d.pool.append(id, tokens, count);
  const int64_t C =
      std::max<int64_t>(1, std::min(d.options.prefillChunk, count));
  const int64_t width =
      d.backend->tableWidth(int64_t(d.pool.find(id)->pages.size()));
  if (allLogits)
    allLogits->resize(size_t(count * V));
  const Clock::time_point start = Clock::now();
  ForwardBatch &b = d.prefillBatch;
  for (int64_t c0 = 0; c0 < count; c0 += C) {
    const int64_t T = std::min(C, count - c0);
    Impl::resize(b, ForwardKind::Prefill, T, width);
    for (int64_t t = 0; t < T; ++t) {
      b.tokens[size_t(t)] = tokens[c0 + t];
      b.positions[size_t(t)] = int32_t(p0 + c0 + t);
      b.lens[size_t(t)] = int32_t(p0 + c0 + t + 1);
      d.pool.fillRow(id, width, b.pageTable.data() + t * width);
    }
    // Every row's logits, or only the prompt's last.
    const bool last = c0 + T == count;
    Rows rows{0, allLogits ? T : (last && lastLogits ? 1 : 0)};
    if (!allLogits)
      rows.first = T - 1;
    CONDENSATE_RETURN_IF_ERROR(forward(
        *d.backend, d.cfg, b, rows,
        allLogits ? allLogits->data() + c0 * V : lastLogits, d.prefillProfile));
    if (progress)
      progress(c0 + T, count);
  }
  if (allLogits && lastLogits)
    std::memcpy(lastLogits, allLogits->data() + (count - 1) * V, size_t(V) * 4);
  d.prefillProfile.total += secondsSince(start);
  d.prefillProfile.steps += count;
  return Status::success();
}

Status Decoder::step(const SeqId *ids, const int32_t *tokens, int64_t B,
                     float *logits) {
  Impl &d = *impl_;
  if (B <= 0)
    return Status::error("step: empty batch");
  const int64_t maxRows = d.backend->maxRows();
  if (maxRows && B > maxRows)
    return Status::error("step: a batch of " + std::to_string(B) +
                         " sequences exceeds maxBatch " +
                         std::to_string(maxRows));
  for (int64_t b = 0; b < B; ++b) {
    CONDENSATE_RETURN_IF_ERROR(d.pool.check(ids[b]).withContext("step"));
    CONDENSATE_RETURN_IF_ERROR(d.checkToken(tokens[b]).withContext("step"));
    for (int64_t c = 0; c < b; ++c)
      if (ids[c] == ids[b])
        return Status::error("step: sequence " + std::to_string(ids[b]) +
                             " appears twice in the batch");
  }
  CONDENSATE_RETURN_IF_ERROR(
      d.pool.checkGrowth(ids, B, 1, d.cfg.contextLength));

  ForwardBatch &batch = d.stepBatch;
  d.rep.resize(size_t(B));
  int64_t longest = 0;
  for (int64_t b = 0; b < B; ++b) {
    d.pool.append(ids[b], tokens + b, 1);
    const PagePool::Sequence &s = *d.pool.find(ids[b]);
    const int64_t len = int64_t(s.tokens.size());
    d.rep[size_t(b)] =
        repetitionScore(s.tokens.data(), len, d.options.repetitionSpan);
    longest = std::max<int64_t>(longest, int64_t(s.pages.size()));
  }
  const int64_t width = d.backend->tableWidth(longest);
  Impl::resize(batch, ForwardKind::Decode, B, width);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = length(ids[b]);
    batch.tokens[size_t(b)] = tokens[b];
    batch.positions[size_t(b)] = int32_t(len - 1);
    batch.lens[size_t(b)] = int32_t(len);
    d.pool.fillRow(ids[b], width, batch.pageTable.data() + b * width);
  }
  const Schedule &sched = schedule();
  const int64_t L = d.cfg.numLayers;
  batch.windows.resize(size_t(L * B));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t b = 0; b < B; ++b)
      batch.windows[size_t(l * B + b)] =
          layerWindow(sched, l, d.cfg.kvHeads, d.rep[size_t(b)]);
  // The fallback memory: a trial step runs the program on every layer;
  // the steps after it run the layers it sent to dense densely.
  Impl::FallbackMemory *memory =
      d.options.fallbackMemory > 0 ? &d.memoryOf(program()) : nullptr;
  const bool trial = memory && (memory->sinceTrial < 0 ||
                                memory->sinceTrial >= d.options.fallbackMemory);
  batch.denseLayers.assign(size_t(L), 0);
  if (memory && !trial)
    for (int64_t l = 0; l < L; ++l)
      batch.denseLayers[size_t(l)] =
          memory->dense[size_t(l)] && d.memoryLayer(sched, l);

  const Clock::time_point start = Clock::now();
  CONDENSATE_RETURN_IF_ERROR(
      forward(*d.backend, d.cfg, batch, Rows{0, B}, logits, d.profile));
  d.profile.total += secondsSince(start);
  ++d.profile.steps;
  if (memory) {
    std::vector<float> &stats = d.backend->stats();
    if (trial) {
      d.rememberFallbacks(sched, stats.data(), batch.lens.data(), B, *memory);
      memory->sinceTrial = 0;
    } else {
      ++memory->sinceTrial;
      // What the dense program wrote, marked as the memory's: no
      // certificate ran on these heads.
      const int64_t hq = d.cfg.qHeads, group = d.shape.group();
      for (int64_t l = 0; l < L; ++l) {
        if (!batch.denseLayers[size_t(l)])
          continue;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < hq; ++h) {
            if (!sched.policyFor(l, h / group).certified())
              continue;
            float *row = stats.data() + ((l * B + b) * hq + h) * kStatFields;
            row[abi::StatEpsHat] = 0.0f;
            row[abi::StatExtra] = 0.0f;
            row[abi::StatFallback] = abi::kRanDense;
            row[abi::StatOutputBound] = 0.0f;
          }
      }
    }
  }
  return Status::success();
}

const std::vector<float> &Decoder::stats() const {
  return impl_->backend->stats();
}
const std::vector<float> &Decoder::lastQueries() const {
  return impl_->backend->queries();
}
const int32_t *Decoder::lastLens() const {
  return impl_->stepBatch.lens.data();
}
const StepProfile &Decoder::profile() const { return impl_->profile; }
const StepProfile &Decoder::prefillProfile() const {
  return impl_->prefillProfile;
}
void Decoder::resetProfile() {
  impl_->profile = StepProfile();
  impl_->prefillProfile = StepProfile();
}

Status Decoder::teacherForce(SeqId seq, const int32_t *tokens, int64_t count,
                             std::vector<float> &logits,
                             std::vector<float> *stats) {
  const int64_t V = impl_->cfg.vocab;
  const int64_t perStep =
      impl_->cfg.numLayers * impl_->cfg.qHeads * kStatFields;
  logits.resize(size_t(count * V));
  if (stats)
    stats->resize(size_t(count * perStep));
  for (int64_t i = 0; i < count; ++i) {
    CONDENSATE_RETURN_IF_ERROR(
        step(seq, tokens[i], logits.data() + i * V)
            .withContext("teacher-forced step " + std::to_string(i)));
    if (stats)
      std::memcpy(stats->data() + i * perStep, this->stats().data(),
                  size_t(perStep) * 4);
  }
  return Status::success();
}

} // namespace condensate::decoder
