//===- CPUProgram.cpp - JIT-compiled condensate attention on the CPU ------===//
//
// Lowers a model's schedule with the condensate-to-cpu pipeline, JIT-compiles
// the result with MLIR's ExecutionEngine, and calls the generated functions
// through their C interface with memref descriptors built from host buffers.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/CPUProgram.h"

#include "Support.h"

#include "condensate/Codegen/Passes.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include <chrono>
#include <map>
#include <mutex>

using mlir::ExecutionEngine;
using mlir::ExecutionEngineOptions;
namespace mc = mlir::condensate;

namespace condensate {

namespace {

/// The share of the calling thread's attention call (CPUProgram::attend
/// sets it around the call), read by the generated code through
/// cpuKVShare, which the JIT resolves kCpuKVShareSymbol to.
thread_local CPUProgram::KVShare currentShare;

int64_t cpuKVShare(int64_t which) {
  return which == 0 ? currentShare.part : currentShare.parts;
}

/// MLIR's strided memref descriptor (StridedMemRefType<T, rank>) of a dense
/// row-major buffer, as words: allocated and aligned pointer, offset, sizes,
/// strides (pointers and int64 are both 8 bytes, so there is no padding).
std::vector<int64_t> describe(const void *data, const abi::Shape &sizes) {
  static_assert(sizeof(void *) == sizeof(int64_t));
  int64_t rank = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> d(3 + 2 * rank);
  d[0] = d[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data));
  d[2] = 0;
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    d[3 + i] = sizes[i];
    d[3 + rank + i] = stride;
    stride *= sizes[i];
  }
  return d;
}

/// Calls a generated C-interface function taking sizeof...(I) memref
/// descriptors.
template <size_t... I>
void callWith(void *fn, std::vector<std::vector<int64_t>> &descs,
              std::index_sequence<I...>) {
  using Fn = void (*)(decltype((void)I, (void *)nullptr)...);
  reinterpret_cast<Fn>(fn)(static_cast<void *>(descs[I].data())...);
}

/// Describes `pointers` with `shapes` (ABI order) and calls `fn`.
template <int N>
void call(void *fn, const std::vector<const void *> &pointers,
          const std::vector<abi::Shape> &shapes) {
  std::vector<std::vector<int64_t>> descs;
  for (int i = 0; i < N; ++i)
    descs.push_back(describe(pointers[i], shapes[i]));
  callWith(fn, descs, std::make_index_sequence<N>());
}

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
  std::vector<void *> layers; ///< _mlir_ciface_ function of each layer
  std::vector<void *> prefill; ///< prefill function of each layer
  std::vector<bool> adaptive;
  void *append = nullptr;
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

/// Lowers and JIT-compiles the first model of `module` (owned by `ctx`).
Result<std::unique_ptr<CPUProgram::Impl>>
buildProgram(mlir::MLIRContext *ctx, mlir::OwningOpRef<mlir::ModuleOp> module,
             const std::string &bufferName,
             std::chrono::steady_clock::time_point start) {
  initializeNativeTarget();
  auto found = detail::firstModel(*module, bufferName);
  if (!found.ok())
    return found.status();
  mc::ModelOp model = *found;
  std::string name = model.getSymName().str();
  auto impl = std::make_unique<CPUProgram::Impl>();
  auto shape = detail::shapeFromModel(model);
  if (!shape.ok())
    return shape.status().withContext(bufferName);
  auto schedule = detail::scheduleFromAttr(model.getSchedule());
  if (!schedule.ok())
    return schedule.status().withContext(bufferName);
  impl->shape = *shape;
  impl->schedule = *schedule;

  detail::DiagnosticCollector diags(ctx);
  mlir::PassManager pm(ctx);
  mc::CPUPipelineOptions pipeline;
  pipeline.kvShare = true; // attend() sets the calling thread's share
  mc::buildCondensateToCPUPipeline(pm, pipeline);
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
  auto prefill = table.getAs<mlir::ArrayAttr>("prefill");
  auto adaptive = table.getAs<mlir::DenseI64ArrayAttr>("adaptive");
  (*module)->removeAttr(mc::kLayerTablesAttrName);

  ExecutionEngineOptions options;
  // options.transformer is a function_ref: the function it refers to must
  // outlive ExecutionEngine::create.
  std::function<llvm::Error(llvm::Module *)> transformer =
      mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                      /*targetMachine=*/nullptr);
  options.transformer = transformer;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  // CONDENSATE_JIT_PERF=1: LLVM's perf listener names the JIT's functions
  // for `perf record -k 1` + `perf inject --jit` (a profiling aid). Off
  // otherwise: on by default in ExecutionEngineOptions, it wrote a
  // jit-<pid>.dump folder (~180 KB) under $JITDUMPDIR/.debug/jit (else the
  // home or temporary folder) for every program compiled, never removed.
  const char *perf = std::getenv("CONDENSATE_JIT_PERF");
  options.enablePerfNotificationListener =
      perf != nullptr && std::string(perf) == "1";
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine) {
    std::string message = llvm::toString(engine.takeError());
    return Status::error(bufferName + ": JIT compilation failed: " + message);
  }
  impl->engine = std::move(*engine);
  impl->engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner(abi::kCpuKVShareSymbol)] = {
        llvm::orc::ExecutorAddr::fromPtr(&cpuKVShare),
        llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  auto lookup = [&](llvm::StringRef fn) -> Result<void *> {
    auto sym = impl->engine->lookup(("_mlir_ciface_" + fn).str());
    if (!sym) {
      std::string message = llvm::toString(sym.takeError());
      return Status::error("symbol _mlir_ciface_" + fn.str() +
                           " not found: " + message);
    }
    return *sym;
  };
  std::map<std::string, void *> byName;
  for (mlir::Attribute a : layers) {
    std::string fn = mlir::cast<mlir::FlatSymbolRefAttr>(a).getValue().str();
    if (!byName.count(fn)) {
      auto sym = lookup(fn);
      if (!sym.ok())
        return sym.status();
      byName[fn] = *sym;
    }
    impl->layers.push_back(byName[fn]);
  }
  if (prefill)
    for (mlir::Attribute a : prefill) {
      std::string fn = mlir::cast<mlir::FlatSymbolRefAttr>(a).getValue().str();
      auto sym = lookup(fn);
      if (!sym.ok())
        return sym.status();
      impl->prefill.push_back(*sym);
    }
  auto appendSym = lookup(appendRef.getValue());
  if (!appendSym.ok())
    return appendSym.status();
  impl->append = *appendSym;
  impl->adaptive.assign(impl->layers.size(), false);
  for (int64_t l : adaptive.asArrayRef())
    impl->adaptive[l] = true;
  impl->info.functions = static_cast<int64_t>(byName.size());
  impl->info.seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  return impl;
}

/// Returns the cached program of `key`, or builds one with `build` and
/// caches it.
Result<std::shared_ptr<const CPUProgram>>
compileCached(const std::string &key,
              const std::function<Result<std::unique_ptr<CPUProgram::Impl>>()>
                  &build,
              const std::function<std::shared_ptr<const CPUProgram>(
                  std::unique_ptr<CPUProgram::Impl>)> &wrap) {
  ProgramCache &cache = ProgramCache::get();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.programs.find(key);
    if (it != cache.programs.end())
      if (auto program = it->second.lock())
        return program;
  }
  auto impl = build();
  if (!impl.ok())
    return impl.status();
  std::shared_ptr<const CPUProgram> program = wrap(impl.take());
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.programs[key] = program;
  return program;
}

} // namespace

CPUProgram::CPUProgram(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CPUProgram::~CPUProgram() = default;

std::shared_ptr<const CPUProgram>
CPUProgram::fromImpl(std::unique_ptr<Impl> impl) {
  return std::shared_ptr<const CPUProgram>(new CPUProgram(std::move(impl)));
}

Result<std::shared_ptr<const CPUProgram>>
CPUProgram::compile(const ModelShape &shape, const Schedule &schedule) {
  CONDENSATE_RETURN_IF_ERROR(shape.validate());
  CONDENSATE_RETURN_IF_ERROR(schedule.validate());
  if (schedule.numLayers != shape.numLayers)
    return Status::error("the schedule is for " +
                         std::to_string(schedule.numLayers) +
                         " layers but the model has " +
                         std::to_string(shape.numLayers));
  // The cache key is the model op text (printed, never parsed); the module
  // is built from the structures.
  return compileCached(
      modelToMLIR("model", shape, schedule),
      [&]() -> Result<std::unique_ptr<Impl>> {
        auto start = std::chrono::steady_clock::now();
        auto ctx = detail::makeContext();
        auto module = detail::buildModelModule(ctx.get(), "model", shape,
                                               schedule);
        if (!module.ok())
          return module.status();
        return buildProgram(ctx.get(), module.take(), "<model>", start);
      },
      [](std::unique_ptr<Impl> impl) { return fromImpl(std::move(impl)); });
}

Result<std::shared_ptr<const CPUProgram>>
CPUProgram::compileMLIR(const std::string &text,
                        const std::string &bufferName) {
  return compileCached(
      text,
      [&]() -> Result<std::unique_ptr<Impl>> {
        auto start = std::chrono::steady_clock::now();
        auto ctx = detail::makeContext();
        auto module = detail::parseModule(ctx.get(), text, bufferName);
        if (!module.ok())
          return module.status();
        return buildProgram(ctx.get(), module.take(), bufferName, start);
      },
      [](std::unique_ptr<Impl> impl) { return fromImpl(std::move(impl)); });
}

const ModelShape &CPUProgram::shape() const { return impl->shape; }
const Schedule &CPUProgram::schedule() const { return impl->schedule; }
const CompileInfo &CPUProgram::info() const { return impl->info; }
bool CPUProgram::isAdaptive(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(impl->adaptive.size()) &&
         impl->adaptive[layer];
}

Status CPUProgram::attend(int64_t layer, const AttentionArgs &a,
                          KVShare share) const {
  if (layer < 0 || layer >= static_cast<int64_t>(impl->layers.size()))
    return Status::error("attend: layer " + std::to_string(layer) +
                         " out of range [0, " +
                         std::to_string(impl->layers.size()) + ")");
  if (share.parts < 1 || share.part < 0 || share.part >= share.parts)
    return Status::error("attend: share " + std::to_string(share.part) +
                         " of " + std::to_string(share.parts) +
                         " (want 0 <= part < parts)");
  CONDENSATE_RETURN_IF_ERROR(
      checkAttentionArgs(impl->shape, a, impl->adaptive[layer],
                         /*hostTables=*/true)
          .withContext("layer " + std::to_string(layer)));
  // A placeholder keeps the windows descriptor valid when none is needed.
  std::vector<int32_t> noWindows;
  std::vector<const void *> pointers = a.pointers();
  if (!a.windows) {
    noWindows.assign(a.batch, 0);
    pointers[abi::AttendWindows] = noWindows.data();
  }
  const KVShare outer = currentShare;
  currentShare = share;
  call<abi::kAttendArgs>(impl->layers[layer], pointers,
                         shapesOf(impl->shape, a));
  currentShare = outer;
  if (a.batch > 0 && a.stats[abi::StatFallback] == abi::kWorkspaceFailed)
    return Status::error(
        "attend: layer " + std::to_string(layer) +
        ": the kernel could not allocate its scratch memory (batch " +
        std::to_string(a.batch) + ", " + std::to_string(a.maxPages) +
        " pages a sequence)");
  return Status::success();
}

Status CPUProgram::prefill(int64_t layer, const PrefillArgs &a) const {
  if (layer < 0 || layer >= static_cast<int64_t>(impl->prefill.size()))
    return Status::error("prefill: layer " + std::to_string(layer) +
                         " out of range [0, " +
                         std::to_string(impl->prefill.size()) + ")");
  CONDENSATE_RETURN_IF_ERROR(
      checkPrefillArgs(impl->shape, a, /*hostTables=*/true)
          .withContext("layer " + std::to_string(layer)));
  call<abi::kPrefillArgs>(impl->prefill[layer], a.pointers(),
                          shapesOf(impl->shape, a));
  return Status::success();
}

Status CPUProgram::append(const AppendArgs &a) const {
  CONDENSATE_RETURN_IF_ERROR(
      checkAppendArgs(impl->shape, a, /*hostTables=*/true));
  call<abi::kAppendArgs>(impl->append, a.pointers(), shapesOf(impl->shape, a));
  return Status::success();
}

} // namespace condensate
