//===- CAPI.cpp - the C interface of the compiler library -----------------===//
//
// condensate_gpu_compile: parse a condensate.model op once, get its kernel
// library (memory cache, disk cache or an in-process compile) and load it
// as a runtime program handle.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/condensate_compiler_c.h"

#include "condensate/Compiler/Compiler.h"

#include "../gpu/CAPIHandle.h"

using namespace condensate;
using condensate::capi::fail;

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


} // extern "C"
