//===- Program.cpp - load and launch generated GPU kernels ----------------===//
//
// The executor of launch plans on the CUDA driver API: loads a library's
// PTX, sizes the scratch workspace from the plan's expressions and launches
// each function's kernels on the caller's stream.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/GPUProgram.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace condensate {

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
  const char *gridDependency = std::getenv("CONDENSATE_GRID_DEPENDENCY");
  p->programmatic_ = !(gridDependency && std::strcmp(gridDependency, "0") == 0);
  auto module = p->library_->cubin.empty()
                    ? cuda::Module::loadPtx(p->library_->ptx)
                    : cuda::Module::loadImage(p->library_->cubin.data(),
                                              p->library_->cubin.size());
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
      // Past 48 KB a kernel must opt in to its dynamic shared memory; a
      // device that has less fails here, naming the kernel.
      if (l.sharedBytes > 0)
        CONDENSATE_RETURN_IF_ERROR(
            f->setMaxDynamicSharedMemory(static_cast<int>(l.sharedBytes)));
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
  return abi::attendShapes(modelDims(s), {batch, maxPages, numPages});
}

std::vector<std::vector<int64_t>> appendShapes(const ModelShape &s,
                                               int64_t batch, int64_t maxPages,
                                               int64_t numPages) {
  return abi::appendShapes(modelDims(s), {batch, maxPages, numPages});
}

cuda::DevicePtr devicePtr(const void *p) {
  return static_cast<cuda::DevicePtr>(reinterpret_cast<uintptr_t>(p));
}

std::vector<cuda::DevicePtr> devicePtrs(const std::vector<const void *> &ps) {
  std::vector<cuda::DevicePtr> out;
  for (const void *p : ps)
    out.push_back(devicePtr(p));
  return out;
}
} // namespace

Result<int64_t>
GPUProgram::scratchBytes(const FunctionPlan &fn,
                         const std::vector<std::vector<int64_t>> &shapes,
                         std::vector<int64_t> *offsets) const {
  int64_t total = 0;
  for (size_t i = 0; i < fn.scratch.size(); ++i) {
    const ScratchBuffer &s = fn.scratch[i];
    auto tooLarge = [&] {
      return Status::error("scratch buffer " + std::to_string(i) + " of " +
                           fn.name + " does not fit in 64-bit sizes");
    };
    int64_t elems = 1;
    for (const Expr &e : s.shape) {
      auto v = e.eval(shapes);
      if (!v.ok())
        return v;
      if (*v < 0)
        return Status::error("scratch buffer " + std::to_string(i) + " of " +
                             fn.name + " has a dimension of " +
                             std::to_string(*v));
      if (__builtin_mul_overflow(elems, *v, &elems))
        return tooLarge();
    }
    if (offsets)
      offsets->push_back(total);
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elems, s.elementBytes, &bytes) ||
        bytes > std::numeric_limits<int64_t>::max() - kScratchAlign ||
        __builtin_add_overflow(
            total, (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign,
            &total))
      return tooLarge();
  }
  return total;
}

Status GPUProgram::reserve(int64_t maxBatch, int64_t maxPages,
                           int64_t numPages) {
  int64_t need = 0;
  for (const auto &[name, fn] : library_->plan.functions) {
    if (fn.scratch.empty()) // prefill functions, checked on load
      continue;
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
    cuda::LaunchOptions how;
    how.programmatic = programmatic_ && l.gridDependency;
    CONDENSATE_RETURN_IF_ERROR(cuda::launch(
        functions_.at(l.kernel), grid, block,
        static_cast<unsigned>(l.sharedBytes), stream, kargs.data(), how));
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
  CONDENSATE_RETURN_IF_ERROR(
      checkAttentionArgs(shape(), a, isAdaptive(layer), /*hostTables=*/false)
          .withContext("layer " + std::to_string(layer)));
  return run(plan.functions.at(plan.layers[layer]), devicePtrs(a.pointers()),
             shapesOf(shape(), a), stream, profile);
}

Status GPUProgram::append(const AppendArgs &a, const cuda::Stream &stream) {
  CONDENSATE_RETURN_IF_ERROR(
      checkAppendArgs(shape(), a, /*hostTables=*/false));
  const LaunchPlan &plan = library_->plan;
  return run(plan.functions.at(plan.append), devicePtrs(a.pointers()),
             shapesOf(shape(), a), stream);
}

Status GPUProgram::prefill(int64_t layer, const PrefillArgs &a,
                           const cuda::Stream &stream) {
  const LaunchPlan &plan = library_->plan;
  if (plan.prefill.empty())
    return Status::error("prefill: this kernel library has no prefill "
                         "functions (built before prefill_attention; "
                         "rebuild it)");
  if (layer < 0 || layer >= static_cast<int64_t>(plan.prefill.size()))
    return Status::error("prefill: layer " + std::to_string(layer) +
                         " out of range [0, " +
                         std::to_string(plan.prefill.size()) + ")");
  CONDENSATE_RETURN_IF_ERROR(
      checkPrefillArgs(shape(), a, /*hostTables=*/false)
          .withContext("layer " + std::to_string(layer)));
  return run(plan.functions.at(plan.prefill[layer]), devicePtrs(a.pointers()),
             shapesOf(shape(), a), stream);
}

} // namespace condensate
