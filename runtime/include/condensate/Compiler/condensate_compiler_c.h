/*===- condensate_compiler_c.h - C API of the condensate compiler ---------===*
 *
 * The one C entry point that needs the compiler library
 * (libCondensateCompiler): compile a model in-process and load it as a
 * program of the runtime's C API (condensate/Runtime/condensate_c.h).
 *
 *===----------------------------------------------------------------------===*/
#ifndef CONDENSATE_COMPILER_CONDENSATE_COMPILER_C_H
#define CONDENSATE_COMPILER_CONDENSATE_COMPILER_C_H

#include "condensate/Runtime/condensate_c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compiles (or loads from the memory/disk cache) the condensate.model op in
 * `model_mlir` for `chip` ("sm_90") and loads it on device 0. `seconds`
 * receives the compile or load time; `source` 0 = compiled, 1 = memory
 * cache, 2 = disk cache. `cache_dir` NULL uses the default, "" disables. */
int condensate_gpu_compile(const char *model_mlir, const char *chip,
                           const char *cache_dir,
                           condensate_gpu_program **program, double *seconds,
                           int *source, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* CONDENSATE_COMPILER_CONDENSATE_COMPILER_C_H */
