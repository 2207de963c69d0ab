//===- GPUProgram.cpp - load and launch generated GPU kernels -------------===//
//
// The JIT cache (memory, then disk, then the compiler) and the executor of
// launch plans on the CUDA driver API.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/GPUProgram.h"
#include "CompilerId.inc"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace condensate {

//===----------------------------------------------------------------------===//
// Caches
//===----------------------------------------------------------------------===//

std::string defaultCacheDirectory() {
  if (const char *dir = std::getenv("CONDENSATE_CACHE_DIR"))
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"))
    return std::string(xdg) + "/condensate";
  if (const char *home = std::getenv("HOME"))
    return std::string(home) + "/.cache/condensate";
  return "";
}

namespace {

/// FNV-1a: a stable hash of the model text (std::hash is not stable across
/// processes, which a disk cache needs).
uint64_t stableHash(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream os;
  os << in.rdbuf();
  out = os.str();
  return static_cast<bool>(in) || in.eof();
}

Status makeDirectories(const std::string &path) {
  std::string partial;
  std::istringstream parts(path);
  if (!path.empty() && path[0] == '/')
    partial = "/";
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty())
      continue;
    partial += part + "/";
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::error("cannot create cache directory " + partial);
  }
  return Status::success();
}

/// Writes atomically (temp file + rename) so concurrent processes never see
/// half a cache entry.
Status writeFileAtomic(const std::string &path, const std::string &data) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out)
      return Status::error("cannot write " + tmp);
    out << data;
    if (!out)
      return Status::error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::error("cannot rename " + tmp + " to " + path);
  return Status::success();
}

/// The process-wide in-memory cache of compiled libraries.
struct LibraryCache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const GPULibrary>> libraries;
  static LibraryCache &get() {
    static LibraryCache cache;
    return cache;
  }
};

} // namespace

Result<std::shared_ptr<const GPULibrary>>
getGPULibrary(const ModelShape &shape, const Schedule &schedule,
              const GPUCompileOptions &options, GPUCompileReport *report) {
  CONDENSATE_RETURN_IF_ERROR(shape.validate());
  CONDENSATE_RETURN_IF_ERROR(schedule.validate());
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  std::string text = modelToMLIR("model", shape, schedule);
  // The compiler's identity keeps kernels of an older build out.
  std::string key = std::string(CONDENSATE_COMPILER_ID) + "\n" +
                    options.chip + "\n" + text;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(stableHash(key)));
  GPUCompileReport local;
  GPUCompileReport &r = report ? *report : local;
  r.cacheKey = hex;
  LibraryCache &cache = LibraryCache::get();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.libraries.find(key);
    if (it != cache.libraries.end()) {
      r.source = GPUCompileReport::Source::MemoryCache;
      r.seconds = elapsed();
      return it->second;
    }
  }
  std::shared_ptr<const GPULibrary> lib;
  std::string base =
      options.cacheDir.empty() ? "" : options.cacheDir + "/" + hex;
  if (!base.empty()) {
    std::string manifest, ptx;
    if (readFile(base + ".json", manifest) && readFile(base + ".ptx", ptx)) {
      auto loaded = GPULibrary::fromManifest(manifest, ptx);
      // A stale or damaged entry is ignored and rebuilt.
      if (loaded.ok() && loaded->modelText == text) {
        lib = std::make_shared<const GPULibrary>(loaded.take());
        r.source = GPUCompileReport::Source::DiskCache;
      }
    }
  }
  if (!lib) {
    auto compiled = compileGPULibrary(text, "<model>", options.chip);
    if (!compiled.ok())
      return compiled.status();
    lib = std::make_shared<const GPULibrary>(compiled.take());
    r.source = GPUCompileReport::Source::Compiled;
    if (!base.empty() && makeDirectories(options.cacheDir).ok()) {
      // The disk cache is best effort: a failed write only costs a compile.
      (void)writeFileAtomic(base + ".ptx", lib->ptx);
      (void)writeFileAtomic(base + ".json", lib->manifestJSON());
    }
  }
  r.seconds = elapsed();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.libraries.emplace(key, lib);
  return lib;
}

//===----------------------------------------------------------------------===//
// GPUProgram
//===----------------------------------------------------------------------===//

Result<std::unique_ptr<GPUProgram>>
GPUProgram::load(std::shared_ptr<const GPULibrary> library, int device) {
  auto driver = cuda::Driver::get();
  if (!driver.ok())
    return driver.status();
  std::unique_ptr<GPUProgram> p(new GPUProgram());
  p->library_ = std::move(library);
  auto ctx = cuda::Context::primary(device);
  if (!ctx.ok())
    return ctx.status();
  p->context_ = ctx.take();
  auto module = cuda::Module::loadPtx(p->library_->ptx);
  if (!module.ok())
    return module.status();
  p->module_ = module.take();
  for (const auto &[name, fn] : p->library_->plan.functions)
    for (const KernelLaunch &l : fn.launches) {
      if (p->functions_.count(l.kernel))
        continue;
      auto f = p->module_.getFunction(l.kernel);
      if (!f.ok())
        return f.status();
      p->functions_.emplace(l.kernel, f.take());
    }
  p->adaptive_.assign(p->library_->plan.layers.size(), false);
  for (int64_t l : p->library_->plan.adaptive)
    if (l >= 0 && l < static_cast<int64_t>(p->adaptive_.size()))
      p->adaptive_[l] = true;
  return p;
}

bool GPUProgram::isAdaptive(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(adaptive_.size()) &&
         adaptive_[layer];
}

namespace {
constexpr int64_t kScratchAlign = 256;

std::vector<std::vector<int64_t>> attentionShapes(const ModelShape &s,
                                                  int64_t batch,
                                                  int64_t maxPages,
                                                  int64_t numPages) {
  return {{batch, s.qHeads, s.headDim},
          {numPages, s.kvHeads, s.pageSize, s.headDim},
          {numPages, s.kvHeads, s.pageSize, s.headDim},
          {batch, maxPages},
          {batch},
          {batch},
          {numPages, s.kvHeads, 5, s.headDim},
          {batch, s.qHeads, s.headDim},
          {batch, s.qHeads, kAttentionStatsWidth}};
}

std::vector<std::vector<int64_t>> appendShapes(const ModelShape &s,
                                               int64_t batch, int64_t maxPages,
                                               int64_t numPages) {
  return {{batch, s.kvHeads, s.headDim},
          {batch, s.kvHeads, s.headDim},
          {numPages, s.kvHeads, s.pageSize, s.headDim},
          {numPages, s.kvHeads, s.pageSize, s.headDim},
          {batch, maxPages},
          {batch},
          {numPages, s.kvHeads, 5, s.headDim}};
}
} // namespace

Result<int64_t>
GPUProgram::scratchBytes(const FunctionPlan &fn,
                         const std::vector<std::vector<int64_t>> &shapes,
                         std::vector<int64_t> *offsets) const {
  int64_t total = 0;
  for (const ScratchBuffer &s : fn.scratch) {
    int64_t elems = 1;
    for (const Expr &e : s.shape) {
      auto v = e.eval(shapes);
      if (!v.ok())
        return v;
      elems *= *v;
    }
    if (offsets)
      offsets->push_back(total);
    int64_t bytes = elems * s.elementBytes;
    total += (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  }
  return total;
}

Status GPUProgram::reserve(int64_t maxBatch, int64_t maxPages,
                           int64_t numPages) {
  int64_t need = 0;
  for (const auto &[name, fn] : library_->plan.functions) {
    auto shapes = name == library_->plan.append
                      ? appendShapes(shape(), maxBatch, maxPages, numPages)
                      : attentionShapes(shape(), maxBatch, maxPages, numPages);
    auto bytes = scratchBytes(fn, shapes, nullptr);
    if (!bytes.ok())
      return bytes.status();
    need = std::max(need, *bytes);
  }
  if (need <= static_cast<int64_t>(workspace_.size()))
    return Status::success();
  auto buffer = cuda::DeviceBuffer::allocate(static_cast<size_t>(need));
  if (!buffer.ok())
    return buffer.status().withContext("reserving the attention workspace");
  workspace_ = buffer.take();
  return Status::success();
}

Status GPUProgram::run(const FunctionPlan &fn,
                       const std::vector<cuda::DevicePtr> &args,
                       const std::vector<std::vector<int64_t>> &shapes,
                       const cuda::Stream &stream, Profile *profile) {
  std::vector<cuda::Event> marks;
  std::vector<int64_t> offsets;
  auto need = scratchBytes(fn, shapes, &offsets);
  if (!need.ok())
    return need.status();
  workspaceBytes_ = *need;
  if (*need > static_cast<int64_t>(workspace_.size())) {
    auto capturing = stream.isCapturing();
    if (capturing.ok() && *capturing)
      return Status::error("the attention workspace must be reserved before "
                           "graph capture (GPUProgram::reserve)");
    // In-flight kernels may still use the old workspace.
    CONDENSATE_RETURN_IF_ERROR(stream.synchronize());
    workspace_ = cuda::DeviceBuffer();
    auto buffer = cuda::DeviceBuffer::allocate(static_cast<size_t>(*need));
    if (!buffer.ok())
      return buffer.status();
    workspace_ = buffer.take();
  }
  for (const KernelLaunch &l : fn.launches) {
    cuda::Dim3 grid;
    int64_t g[3];
    for (int i = 0; i < 3; ++i) {
      auto v = l.grid[i].eval(shapes);
      if (!v.ok())
        return v.status();
      g[i] = *v;
    }
    if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0)
      continue; // nothing to do (e.g. an empty batch dimension)
    grid = {static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]),
            static_cast<unsigned>(g[2])};
    cuda::KernelArgs kargs;
    for (const MemRefParam &p : l.params) {
      cuda::DevicePtr base;
      if (p.buffer.kind == BufferRef::Kind::Argument) {
        if (p.buffer.index >= static_cast<int64_t>(args.size()) ||
            !args[p.buffer.index])
          return Status::error("kernel " + l.kernel + " needs argument " +
                               std::to_string(p.buffer.index) +
                               ", which is null");
        base = args[p.buffer.index];
      } else {
        base = workspace_.address() + offsets[p.buffer.index];
      }
      auto off = p.offset.eval(shapes);
      if (!off.ok())
        return off.status();
      kargs.u64(base).u64(base).i64(*off);
      for (const Expr &e : p.sizes) {
        auto v = e.eval(shapes);
        if (!v.ok())
          return v.status();
        kargs.i64(*v);
      }
      for (const Expr &e : p.strides) {
        auto v = e.eval(shapes);
        if (!v.ok())
          return v.status();
        kargs.i64(*v);
      }
    }
    cuda::Dim3 block{static_cast<unsigned>(l.block[0]),
                     static_cast<unsigned>(l.block[1]),
                     static_cast<unsigned>(l.block[2])};
    if (profile && marks.empty()) {
      auto ev = cuda::Event::create();
      if (!ev.ok())
        return ev.status();
      CONDENSATE_RETURN_IF_ERROR(ev->record(stream));
      marks.push_back(ev.take());
    }
    CONDENSATE_RETURN_IF_ERROR(cuda::launch(functions_.at(l.kernel), grid,
                                            block, 0, stream, kargs.data()));
    if (profile) {
      auto ev = cuda::Event::create();
      if (!ev.ok())
        return ev.status();
      CONDENSATE_RETURN_IF_ERROR(ev->record(stream));
      marks.push_back(ev.take());
      profile->push_back({l.kernel, 0.0f});
    }
  }
  if (profile && !marks.empty()) {
    CONDENSATE_RETURN_IF_ERROR(marks.back().synchronize());
    size_t first = profile->size() - (marks.size() - 1);
    for (size_t i = 1; i < marks.size(); ++i) {
      auto ms = cuda::Event::elapsedMs(marks[i - 1], marks[i]);
      if (!ms.ok())
        return ms.status();
      (*profile)[first + i - 1].second = *ms;
    }
  }
  return Status::success();
}

Status GPUProgram::attend(int64_t layer, const AttentionArgs &a,
                          const cuda::Stream &stream, Profile *profile) {
  const LaunchPlan &plan = library_->plan;
  if (layer < 0 || layer >= static_cast<int64_t>(plan.layers.size()))
    return Status::error("attend: layer " + std::to_string(layer) +
                         " out of range [0, " +
                         std::to_string(plan.layers.size()) + ")");
  if (a.batch <= 0 || a.maxPages <= 0 || a.numPages <= 0)
    return Status::error("attend: batch, maxPages and numPages must be > 0");
  if (isAdaptive(layer) && !a.windows)
    return Status::error("attend: layer " + std::to_string(layer) +
                         " has an adaptive window and needs 'windows'");
  auto ptr = [](const void *p) {
    return static_cast<cuda::DevicePtr>(reinterpret_cast<uintptr_t>(p));
  };
  std::vector<cuda::DevicePtr> args = {
      ptr(a.q),    ptr(a.kCache),    ptr(a.vCache), ptr(a.pageTable),
      ptr(a.lens), ptr(a.windows),   ptr(a.summaries), ptr(a.out),
      ptr(a.stats)};
  return run(plan.functions.at(plan.layers[layer]), args,
             attentionShapes(shape(), a.batch, a.maxPages, a.numPages), stream,
             profile);
}

Status GPUProgram::append(const AppendArgs &a, const cuda::Stream &stream) {
  if (a.batch <= 0 || a.maxPages <= 0 || a.numPages <= 0)
    return Status::error("append: batch, maxPages and numPages must be > 0");
  auto ptr = [](const void *p) {
    return static_cast<cuda::DevicePtr>(reinterpret_cast<uintptr_t>(p));
  };
  std::vector<cuda::DevicePtr> args = {
      ptr(a.kNew),      ptr(a.vNew),      ptr(a.kCache),   ptr(a.vCache),
      ptr(a.pageTable), ptr(a.positions), ptr(a.summaries)};
  const LaunchPlan &plan = library_->plan;
  return run(plan.functions.at(plan.append), args,
             appendShapes(shape(), a.batch, a.maxPages, a.numPages), stream);
}

} // namespace condensate
