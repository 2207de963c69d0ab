//===- CPUProgram.cpp - JIT-compiled condensate attention on the CPU ------===//
//
// Lowers a model's schedule with the condensate-to-cpu pipeline, JIT-compiles
// the result with MLIR's ExecutionEngine, and calls the generated functions
// through their C interface with memref descriptors built from host buffers.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Engine.h"

#include "CompilerSupport.h"

#include "condensate/Codegen/Passes.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/TargetSelect.h"

#include <chrono>
#include <map>
#include <mutex>

using mlir::ExecutionEngine;
using mlir::ExecutionEngineOptions;
namespace mc = mlir::condensate;

// The runtime's public stats layout (Engine.h, free of MLIR) is the
// dialect's.
static_assert(condensate::kAttentionStatsWidth == mc::kStatsWidth);
static_assert(int64_t(condensate::kStatEpsHat) == int64_t(mc::StatEpsHat) &&
              int64_t(condensate::kStatAttended) ==
                  int64_t(mc::StatAttended) &&
              int64_t(condensate::kStatExtra) == int64_t(mc::StatExtra) &&
              int64_t(condensate::kStatFallback) ==
                  int64_t(mc::StatFallback) &&
              int64_t(condensate::kStatOutputBound) ==
                  int64_t(mc::StatOutputBound));

namespace condensate {

namespace {

/// Layout of MLIR's strided memref descriptor (StridedMemRefType).
template <int N> struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

template <int N>
Descriptor<N> describe(const void *data, std::array<int64_t, N> sizes) {
  Descriptor<N> d;
  d.allocated = d.aligned = const_cast<void *>(data);
  d.offset = 0;
  int64_t stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    d.sizes[i] = sizes[i];
    d.strides[i] = stride;
    stride *= sizes[i];
  }
  return d;
}

using AttendFn = void (*)(void *, void *, void *, void *, void *, void *,
                          void *, void *, void *);
using AppendFn = void (*)(void *, void *, void *, void *, void *, void *,
                          void *);

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

} // namespace

struct CPUProgram::Impl {
  ModelShape shape;
  Schedule schedule;
  CompileInfo info;
  std::unique_ptr<ExecutionEngine> engine;
  std::vector<AttendFn> layers;
  std::vector<bool> adaptive;
  AppendFn append = nullptr;
};

namespace {

/// The process-wide cache of compiled programs, keyed by the model op text
/// (which spells out the shape, types and schedule). Programs are immutable
/// once built and shared.
struct ProgramCache {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<const CPUProgram>> programs;
  static ProgramCache &get() {
    static ProgramCache cache;
    return cache;
  }
};

Result<std::unique_ptr<CPUProgram::Impl>>
buildProgram(const std::string &text, const std::string &bufferName) {
  auto start = std::chrono::steady_clock::now();
  initializeNativeTarget();
  auto ctx = detail::makeContext();
  auto parsed = detail::parseModule(ctx.get(), text, bufferName);
  if (!parsed.ok())
    return parsed.status();
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*parsed);
  auto models = module->getOps<mc::ModelOp>();
  if (models.empty())
    return Status::error(bufferName + ": no condensate.model op");
  mc::ModelOp model = *models.begin();
  std::string name = model.getSymName().str();
  auto impl = std::make_unique<CPUProgram::Impl>();
  auto shape = detail::shapeFromModel(model);
  auto schedule = detail::scheduleFromAttr(model.getSchedule());
  if (!shape.ok() || !schedule.ok())
    return Status::error(bufferName + ": invalid model");
  impl->shape = *shape;
  impl->schedule = *schedule;

  detail::DiagnosticCollector diags(ctx.get());
  mlir::PassManager pm(ctx.get());
  mc::buildCondensateToCPUPipeline(pm, mc::CPUPipelineOptions());
  if (failed(pm.run(*module)))
    return diags.error(bufferName + ": lowering to the CPU failed");

  auto tables = (*module)->getAttrOfType<mlir::DictionaryAttr>(
      mc::kLayerTablesAttrName);
  auto table = tables ? tables.getAs<mlir::DictionaryAttr>(name)
                      : mlir::DictionaryAttr();
  if (!table)
    return Status::error(bufferName + ": no layer table for @" + name);
  auto layers = table.getAs<mlir::ArrayAttr>("layers");
  auto appendRef = table.getAs<mlir::FlatSymbolRefAttr>("append");
  auto adaptive = table.getAs<mlir::DenseI64ArrayAttr>("adaptive");
  (*module)->removeAttr(mc::kLayerTablesAttrName);

  ExecutionEngineOptions options;
  options.transformer = mlir::makeOptimizingTransformer(/*optLevel=*/3,
                                                  /*sizeLevel=*/0,
                                                  /*targetMachine=*/nullptr);
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine) {
    std::string message = llvm::toString(engine.takeError());
    return Status::error(bufferName + ": JIT compilation failed: " + message);
  }
  impl->engine = std::move(*engine);
  auto lookup = [&](llvm::StringRef fn) -> Result<void *> {
    auto sym = impl->engine->lookup(("_mlir_ciface_" + fn).str());
    if (!sym) {
      std::string message = llvm::toString(sym.takeError());
      return Status::error("symbol _mlir_ciface_" + fn.str() +
                           " not found: " + message);
    }
    return *sym;
  };
  std::map<std::string, AttendFn> byName;
  for (mlir::Attribute a : layers) {
    std::string fn = mlir::cast<mlir::FlatSymbolRefAttr>(a).getValue().str();
    if (!byName.count(fn)) {
      auto sym = lookup(fn);
      if (!sym.ok())
        return sym.status();
      byName[fn] = reinterpret_cast<AttendFn>(*sym);
    }
    impl->layers.push_back(byName[fn]);
  }
  auto appendSym = lookup(appendRef.getValue());
  if (!appendSym.ok())
    return appendSym.status();
  impl->append = reinterpret_cast<AppendFn>(*appendSym);
  impl->adaptive.assign(impl->layers.size(), false);
  for (int64_t l : adaptive.asArrayRef())
    impl->adaptive[l] = true;
  impl->info.functions = static_cast<int64_t>(byName.size());
  impl->info.seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  return impl;
}

Result<std::shared_ptr<const CPUProgram>>
compileCached(const std::string &text, const std::string &bufferName,
              std::function<std::shared_ptr<const CPUProgram>(
                  std::unique_ptr<CPUProgram::Impl>)>
                  wrap) {
  ProgramCache &cache = ProgramCache::get();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.programs.find(text);
    if (it != cache.programs.end())
      if (auto program = it->second.lock())
        return program;
  }
  auto impl = buildProgram(text, bufferName);
  if (!impl.ok())
    return impl.status();
  std::shared_ptr<const CPUProgram> program = wrap(impl.take());
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.programs[text] = program;
  return program;
}

} // namespace

CPUProgram::CPUProgram(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CPUProgram::~CPUProgram() = default;

Result<std::shared_ptr<const CPUProgram>>
CPUProgram::compile(const ModelShape &shape, const Schedule &schedule) {
  CONDENSATE_RETURN_IF_ERROR(shape.validate());
  CONDENSATE_RETURN_IF_ERROR(schedule.validate());
  if (schedule.numLayers != shape.numLayers)
    return Status::error("the schedule is for " +
                         std::to_string(schedule.numLayers) +
                         " layers but the model has " +
                         std::to_string(shape.numLayers));
  return compileMLIR(modelToMLIR("model", shape, schedule), "<model>");
}

Result<std::shared_ptr<const CPUProgram>>
CPUProgram::compileMLIR(const std::string &text,
                        const std::string &bufferName) {
  return compileCached(text, bufferName, [](std::unique_ptr<Impl> impl) {
    return std::shared_ptr<const CPUProgram>(new CPUProgram(std::move(impl)));
  });
}

const ModelShape &CPUProgram::shape() const { return impl->shape; }
const Schedule &CPUProgram::schedule() const { return impl->schedule; }
const CompileInfo &CPUProgram::info() const { return impl->info; }
bool CPUProgram::isAdaptive(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(impl->adaptive.size()) &&
         impl->adaptive[layer];
}

Status CPUProgram::attend(int64_t layer, const AttentionArgs &a) const {
  const ModelShape &s = impl->shape;
  if (layer < 0 || layer >= static_cast<int64_t>(impl->layers.size()))
    return Status::error("attend: layer " + std::to_string(layer) +
                         " out of range [0, " +
                         std::to_string(impl->layers.size()) + ")");
  if (a.batch <= 0 || a.maxPages <= 0 || a.numPages <= 0)
    return Status::error("attend: batch, maxPages and numPages must be > 0");
  if (!a.q || !a.kCache || !a.vCache || !a.pageTable || !a.lens ||
      !a.summaries || !a.out || !a.stats)
    return Status::error("attend: a required buffer is null");
  if (impl->adaptive[layer] && !a.windows)
    return Status::error("attend: layer " + std::to_string(layer) +
                         " has an adaptive window and needs 'windows'");
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t n = a.lens[b];
    if (n <= 0 || n > a.maxPages * s.pageSize)
      return Status::error("attend: lens[" + std::to_string(b) + "] = " +
                           std::to_string(n) + " outside [1, " +
                           std::to_string(a.maxPages * s.pageSize) + "]");
    for (int64_t j = 0; j * s.pageSize < n; ++j) {
      int32_t page = a.pageTable[b * a.maxPages + j];
      if (page < 0 || page >= a.numPages)
        return Status::error("attend: page_table[" + std::to_string(b) +
                             ", " + std::to_string(j) + "] = " +
                             std::to_string(page) + " outside [0, " +
                             std::to_string(a.numPages) + ")");
    }
  }
  // A placeholder keeps the windows descriptor valid when none is needed.
  std::vector<int32_t> noWindows;
  const int32_t *windows = a.windows;
  if (!windows) {
    noWindows.assign(a.batch, 0);
    windows = noWindows.data();
  }
  auto q = describe<3>(a.q, {a.batch, s.qHeads, s.headDim});
  auto k = describe<4>(a.kCache, {a.numPages, s.kvHeads, s.pageSize,
                                  s.headDim});
  auto v = describe<4>(a.vCache, {a.numPages, s.kvHeads, s.pageSize,
                                  s.headDim});
  auto pt = describe<2>(a.pageTable, {a.batch, a.maxPages});
  auto lens = describe<1>(a.lens, {a.batch});
  auto win = describe<1>(windows, {a.batch});
  auto sum = describe<4>(a.summaries, {a.numPages, s.kvHeads, 5, s.headDim});
  auto out = describe<3>(a.out, {a.batch, s.qHeads, s.headDim});
  auto stats = describe<3>(a.stats, {a.batch, s.qHeads, kAttentionStatsWidth});
  impl->layers[layer](&q, &k, &v, &pt, &lens, &win, &sum, &out, &stats);
  return Status::success();
}

Status CPUProgram::append(const AppendArgs &a) const {
  const ModelShape &s = impl->shape;
  if (a.batch <= 0 || a.maxPages <= 0 || a.numPages <= 0)
    return Status::error("append: batch, maxPages and numPages must be > 0");
  if (!a.kNew || !a.vNew || !a.kCache || !a.vCache || !a.pageTable ||
      !a.positions || !a.summaries)
    return Status::error("append: a required buffer is null");
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t pos = a.positions[b];
    if (pos < 0 || pos >= a.maxPages * s.pageSize)
      return Status::error("append: positions[" + std::to_string(b) +
                           "] = " + std::to_string(pos) + " outside [0, " +
                           std::to_string(a.maxPages * s.pageSize) + ")");
    int32_t page = a.pageTable[b * a.maxPages + pos / s.pageSize];
    if (page < 0 || page >= a.numPages)
      return Status::error("append: page_table[" + std::to_string(b) + ", " +
                           std::to_string(pos / s.pageSize) + "] = " +
                           std::to_string(page) + " outside [0, " +
                           std::to_string(a.numPages) + ")");
  }
  auto kn = describe<3>(a.kNew, {a.batch, s.kvHeads, s.headDim});
  auto vn = describe<3>(a.vNew, {a.batch, s.kvHeads, s.headDim});
  auto k = describe<4>(a.kCache, {a.numPages, s.kvHeads, s.pageSize,
                                  s.headDim});
  auto v = describe<4>(a.vCache, {a.numPages, s.kvHeads, s.pageSize,
                                  s.headDim});
  auto pt = describe<2>(a.pageTable, {a.batch, a.maxPages});
  auto pos = describe<1>(a.positions, {a.batch});
  auto sum = describe<4>(a.summaries, {a.numPages, s.kvHeads, 5, s.headDim});
  impl->append(&kn, &vn, &k, &v, &pt, &pos, &sum);
  return Status::success();
}

} // namespace condensate
