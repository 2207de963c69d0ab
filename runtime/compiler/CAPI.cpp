//===- CAPI.cpp - the C interface of the compiler library -----------------===//
//
// condensate_gpu_compile: parse a condensate.model op once, get its kernel
// library (memory cache, disk cache or an in-process compile) and load it
// as a runtime program handle.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/condensate_compiler_c.h"

#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Compiler/Compiler.h"

#include "condensate/Runtime/Attention.h"

#include "../gpu/CAPIHandle.h"

#include <cmath>
#include <limits>

using namespace condensate;
using condensate::capi::fail;

struct condensate_cpu_program {
  std::shared_ptr<const CPUProgram> program;
};

extern "C" {

int condensate_gpu_compile(const char *model_mlir, const char *chip,
                           const char *cache_dir,
                           condensate_gpu_program **program, double *seconds,
                           int *source, char *error, size_t error_size) {
  if (!model_mlir || !program)
    return fail(Status::error("condensate_gpu_compile: null argument"), error,
                error_size);
  auto model = parseModel(model_mlir, "<model>");
  if (!model.ok())
    return fail(model.status(), error, error_size);
  GPUCompileOptions options;
  if (chip)
    options.chip = chip;
  if (cache_dir)
    options.cacheDir = cache_dir;
  GPUCompileReport report;
  auto cached = getGPULibrary(model->first, model->second, options, &report);
  if (!cached.ok())
    return fail(cached.status(), error, error_size);
  auto loaded = GPUProgram::load(*cached);
  if (!loaded.ok())
    return fail(loaded.status(), error, error_size);
  if (seconds)
    *seconds = report.seconds;
  if (source)
    *source = static_cast<int>(report.source);
  *program = new condensate_gpu_program{loaded.take()};
  return 0;
}

int condensate_model_text(const char *shape_json, const char *schedule,
                          char **model_mlir, char *error, size_t error_size) {
  if (!shape_json || !schedule || !model_mlir)
    return fail(Status::error("condensate_model_text: null argument"), error,
                error_size);
  auto shape = parseModelShapeJSON(shape_json);
  if (!shape.ok())
    return fail(Status::error("model shape: " + shape.message()), error,
                error_size);
  auto sched = parseSchedule(schedule, shape->numLayers, "<schedule>");
  if (!sched.ok())
    return fail(sched.status(), error, error_size);
  auto full = cacheShapeFor(*shape, *sched);
  if (!full.ok())
    return fail(full.status(), error, error_size);
  return capi::copyOut(modelToMLIR("model", *full, *sched), model_mlir, error,
                       error_size);
}

int condensate_cpu_compile(const char *model_mlir,
                           condensate_cpu_program **program, double *seconds,
                           char *error, size_t error_size) {
  if (!model_mlir || !program)
    return fail(Status::error("condensate_cpu_compile: null argument"), error,
                error_size);
  auto compiled = CPUProgram::compileMLIR(model_mlir, "<model>");
  if (!compiled.ok())
    return fail(compiled.status(), error, error_size);
  if (seconds)
    *seconds = (*compiled)->info().seconds;
  *program = new condensate_cpu_program{compiled.take()};
  return 0;
}

void condensate_cpu_free(condensate_cpu_program *program) { delete program; }

int condensate_cpu_describe(condensate_cpu_program *p, char **json,
                            char *error, size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_cpu_describe: null program"), error,
                error_size);
  return capi::copyOut(
      describeModelJSON(p->program->shape(), p->program->schedule()), json,
      error, error_size);
}

int condensate_cpu_attend(condensate_cpu_program *p, int64_t layer,
                          int64_t batch, int64_t max_pages, int64_t num_pages,
                          const void *q, const void *k, const void *v,
                          const void *pt, const void *lens,
                          const void *windows, const void *summaries,
                          void *out, void *stats, char *error,
                          size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_cpu_attend: null program"), error,
                error_size);
  Status st = p->program->attend(
      layer, capi::attentionArgs(batch, max_pages, num_pages, q, k, v, pt,
                                 lens, windows, summaries, out, stats));
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_cpu_prefill(condensate_cpu_program *p, int64_t layer,
                           int64_t rows, int64_t seqs, int64_t max_pages,
                           int64_t num_pages, const void *q,
                           const void *k_cache, const void *v_cache,
                           const void *page_table, const void *lens,
                           const void *row_starts, void *out, char *error,
                           size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_cpu_prefill: null program"), error,
                error_size);
  Status st = p->program->prefill(
      layer, capi::prefillArgs(rows, seqs, max_pages, num_pages, q, k_cache,
                               v_cache, page_table, lens, row_starts, out));
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_cpu_append(condensate_cpu_program *p, int64_t batch,
                          int64_t max_pages, int64_t num_pages,
                          const void *k_new, const void *v_new, void *k_cache,
                          void *v_cache, const void *page_table,
                          const void *positions, void *summaries, char *error,
                          size_t error_size) {
  if (!p)
    return fail(Status::error("condensate_cpu_append: null program"), error,
                error_size);
  Status st = p->program->append(
      capi::appendArgs(batch, max_pages, num_pages, k_new, v_new, k_cache,
                       v_cache, page_table, positions, summaries));
  return st.ok() ? 0 : fail(st, error, error_size);
}

int condensate_bytes_read(const char *model_mlir, int64_t layer, int64_t batch,
                          const int32_t *lens, const float *stats,
                          double *bytes, double *dense_bytes, char *error,
                          size_t error_size) {
  const char *what = "condensate_bytes_read";
  if (!model_mlir || !lens || !stats || !bytes || !dense_bytes)
    return fail(Status::error(std::string(what) + ": null argument"), error,
                error_size);
  auto model = parseModel(model_mlir, "<model>");
  if (!model.ok())
    return fail(model.status(), error, error_size);
  const auto &[shape, schedule] = *model;
  if (layer < 0 || layer >= shape.numLayers)
    return fail(Status::error(std::string(what) + ": layer " +
                              std::to_string(layer) + " outside [0, " +
                              std::to_string(shape.numLayers) + ")"),
                error, error_size);
  if (batch < 1 || batch > std::numeric_limits<int32_t>::max())
    return fail(Status::error(std::string(what) + ": batch " +
                              std::to_string(batch) + " outside [1, 2^31)"),
                error, error_size);
  const int64_t group = shape.group();
  double sum = 0.0, dense = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    if (lens[b] < 0)
      return fail(
          Status::error(std::string(what) + ": lens[" + std::to_string(b) +
                        "] = " + std::to_string(lens[b]) + " is negative"),
          error, error_size);
    for (int64_t h = 0; h < shape.qHeads; ++h) {
      const float *row0 = stats + (b * shape.qHeads + h) * abi::kStatsWidth;
      const double read =
          bytesRead(schedule.policyFor(layer, h / group), shape, lens[b], row0);
      if (!std::isfinite(read))
        return fail(Status::error(std::string(what) + ": the stats of " +
                                  "sequence " + std::to_string(b) + ", head " +
                                  std::to_string(h) + " are not finite"),
                    error, error_size);
      sum += read;
    }
    dense += double(abi::denseBytes(lens[b], shape.headDim,
                                    kvTypeBytes(shape.kvType))) *
             double(shape.kvHeads);
  }
  *bytes = sum;
  *dense_bytes = dense;
  return 0;
}

} // extern "C"
