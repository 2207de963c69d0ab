//===- CAPI.cpp - the C interface of the GPU runtime ----------------------===//
//
// Thin wrappers: C handles over GPUProgram, Status messages copied into the
// caller's error buffer. Compiling a program is the compiler library's
// (compiler/CAPI.cpp); everything here works on AOT libraries alone.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/condensate_c.h"

#include "CAPIHandle.h"

#include <cstring>

using namespace condensate;
using condensate::capi::appendArgs;
using condensate::capi::attentionArgs;
using condensate::capi::fail;
using condensate::capi::prefillArgs;

namespace {

cuda::Stream streamOf(void *stream) {
  return cuda::Stream::borrow(static_cast<cuda::StreamHandle>(stream), 0);
}

/// Loads `lib` on device 0 as a C handle in `*program`.
int adopt(Result<GPULibrary> lib, condensate_gpu_program **program,
          char *error, size_t error_size) {
  if (!lib.ok())
    return fail(lib.status(), error, error_size);
  auto loaded =
      GPUProgram::load(std::make_shared<const GPULibrary>(lib.take()));
  if (!loaded.ok())
    return fail(loaded.status(), error, error_size);
  *program = new condensate_gpu_program{loaded.take()};
  return 0;
}

} // namespace

extern "C" {

int condensate_gpu_load(const char *ptx_path, const char *manifest_path,
                        condensate_gpu_program **program, char *error,
                        size_t error_size) {
  if (!ptx_path || !manifest_path || !program)
    return fail(Status::error("condensate_gpu_load: null argument"), error,
                error_size);
  return adopt(GPULibrary::load(ptx_path, manifest_path), program, error,
               error_size);
}

int condensate_gpu_load_library(const char *manifest_path,
                                condensate_gpu_program **program, char *error,
                                size_t error_size) {
  if (!manifest_path || !program)
    return fail(Status::error("condensate_gpu_load_library: null argument"),
                error, error_size);
  auto driver = cuda::Driver::get();
  if (!driver.ok())
    return fail(driver.status(), error, error_size);
  return adopt(GPULibrary::loadForDevice(
                   manifest_path, (*driver)->device(0).computeCapability()),
               program, error, error_size);
}

void condensate_gpu_free(condensate_gpu_program *program) { delete program; }

int condensate_gpu_reserve(condensate_gpu_program *p, int64_t max_batch,
                           int64_t max_pages, int64_t num_pages, char *error,
                           size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_gpu_reserve: null program"), error,
                error_size);
  Status st = p->program->reserve(max_batch, max_pages, num_pages);
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_gpu_attend(condensate_gpu_program *p, int64_t layer,
                          int64_t batch, int64_t max_pages, int64_t num_pages,
                          const void *q, const void *k, const void *v,
                          const void *pt, const void *lens,
                          const void *windows, const void *summaries,
                          void *out, void *stats, void *stream, char *error,
                          size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_gpu_attend: null program"), error,
                error_size);
  cuda::Stream s = streamOf(stream);
  Status st = p->program->attend(
      layer,
      attentionArgs(batch, max_pages, num_pages, q, k, v, pt, lens, windows,
                    summaries, out, stats),
      s);
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_gpu_attend_profiled(
    condensate_gpu_program *p, int64_t layer, int64_t batch, int64_t max_pages,
    int64_t num_pages, const void *q, const void *k, const void *v,
    const void *pt, const void *lens, const void *windows,
    const void *summaries, void *out, void *stats, void *stream, char *names,
    size_t names_size, float *ms, int capacity, int *count, char *error,
    size_t error_size) {
  cuda::Stream s = streamOf(stream);
  GPUProgram::Profile profile;
  Status st = p->program->attend(
      layer,
      attentionArgs(batch, max_pages, num_pages, q, k, v, pt, lens, windows,
                    summaries, out, stats),
      s, &profile);
  if (!st.ok())
    return fail(st, error, error_size);
  size_t used = 0;
  int n = 0;
  for (const auto &[name, t] : profile) {
    if (n >= capacity || used + name.size() + 1 > names_size)
      break;
    std::memcpy(names + used, name.c_str(), name.size() + 1);
    used += name.size() + 1;
    ms[n++] = t;
  }
  if (count)
    *count = n;
  return 0;
}

int condensate_gpu_append(condensate_gpu_program *p, int64_t batch,
                          int64_t max_pages, int64_t num_pages,
                          const void *k_new, const void *v_new, void *k_cache,
                          void *v_cache, const void *page_table,
                          const void *positions, void *summaries, void *stream,
                          char *error, size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_gpu_append: null program"), error,
                error_size);
  cuda::Stream s = streamOf(stream);
  Status st = p->program->append(
      appendArgs(batch, max_pages, num_pages, k_new, v_new, k_cache, v_cache,
                 page_table, positions, summaries),
      s);
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_gpu_prefill(condensate_gpu_program *p, int64_t layer,
                           int64_t rows, int64_t seqs, int64_t max_pages,
                           int64_t num_pages, const void *q,
                           const void *k_cache, const void *v_cache,
                           const void *page_table, const void *lens,
                           const void *row_starts, void *out, void *stream,
                           char *error, size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_gpu_prefill: null program"), error,
                error_size);
  cuda::Stream s = streamOf(stream);
  Status st = p->program->prefill(
      layer,
      prefillArgs(rows, seqs, max_pages, num_pages, q, k_cache, v_cache,
                  page_table, lens, row_starts, out),
      s);
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_gpu_describe(condensate_gpu_program *p, char **json,
                            char *error, size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_gpu_describe: null program"), error,
                error_size);
  const GPULibrary &lib = p->program->library();
  return capi::copyOut(describeModelJSON(lib.shape, lib.schedule), json, error,
                       error_size);
}

void condensate_free(void *buffer) { std::free(buffer); }

int condensate_gpu_launch_count(condensate_gpu_program *p, int64_t layer) {
  if (!p)
    return -1;
  const LaunchPlan &plan = p->program->library().plan;
  if (layer < 0 || layer >= static_cast<int64_t>(plan.layers.size()))
    return -1;
  return static_cast<int>(plan.functions.at(plan.layers[layer]).launches.size());
}

} // extern "C"
