/*===- condensate_c.h - C API of the condensate runtime -------------------===*
 *
 * A C interface over the GPU programs, for engines and scripts (the
 * benchmark drives it from Python through ctypes, next to torch on the same
 * CUDA context and stream). Every function returns 0 on success and
 * otherwise a non-zero code with a one-line message in `error`. These live
 * in the MLIR-free runtime (libCondensateRuntime); compiling a program
 * in-process is condensate_gpu_compile in condensate/Compiler/
 * condensate_compiler_c.h (libCondensateCompiler).
 *
 *===----------------------------------------------------------------------===*/
#ifndef CONDENSATE_RUNTIME_CONDENSATE_C_H
#define CONDENSATE_RUNTIME_CONDENSATE_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct condensate_gpu_program condensate_gpu_program;

/* Loads an AOT library written by condensate-translate. */
int condensate_gpu_load(const char *ptx_path, const char *manifest_path,
                        condensate_gpu_program **program, char *error,
                        size_t error_size);

/* Loads an AOT library by its manifest for device 0: a one-chip library
 * (PREFIX.json, PREFIX.ptx, and PREFIX.cubin when built for this GPU) or a
 * fat one (condensate-translate --chip=sm_80,sm_90: PREFIX.json indexes one
 * image per chip). The GPU's own chip loads its cubin; an older chip's PTX
 * is JIT-compiled by the driver. */
int condensate_gpu_load_library(const char *manifest_path,
                                condensate_gpu_program **program, char *error,
                                size_t error_size);

void condensate_gpu_free(condensate_gpu_program *program);

int condensate_gpu_reserve(condensate_gpu_program *program, int64_t max_batch,
                           int64_t max_pages, int64_t num_pages, char *error,
                           size_t error_size);

/* Device pointers; layouts as in condensate/ABI/AttentionABI.h. `stats` is
 * [batch, q_heads, 5] f32 per query head: eps_hat, positions attended,
 * extra units, dense fallback, output-error bound. `stream` is a
 * CUstream / cudaStream_t (NULL = legacy default stream). */
int condensate_gpu_attend(condensate_gpu_program *program, int64_t layer,
                          int64_t batch, int64_t max_pages, int64_t num_pages,
                          const void *q, const void *k_cache,
                          const void *v_cache, const void *page_table,
                          const void *lens, const void *windows,
                          const void *summaries, void *out, void *stats,
                          void *stream, char *error, size_t error_size);

/* As condensate_gpu_attend, but times every kernel (synchronises): writes up
 * to `capacity` kernel names (NUL-separated in `names`, `names_size` bytes)
 * and milliseconds; `count` receives the number of kernels. */
int condensate_gpu_attend_profiled(
    condensate_gpu_program *program, int64_t layer, int64_t batch,
    int64_t max_pages, int64_t num_pages, const void *q, const void *k_cache,
    const void *v_cache, const void *page_table, const void *lens,
    const void *windows, const void *summaries, void *out, void *stats,
    void *stream, char *names, size_t names_size, float *ms, int capacity,
    int *count, char *error, size_t error_size);

int condensate_gpu_append(condensate_gpu_program *program, int64_t batch,
                          int64_t max_pages, int64_t num_pages,
                          const void *k_new, const void *v_new, void *k_cache,
                          void *v_cache, const void *page_table,
                          const void *positions, void *summaries, void *stream,
                          char *error, size_t error_size);

/* Prefill (causal) attention of `layer` for `rows` query rows of `seqs`
 * sequences (condensate::PrefillArgs): q, out [rows, q_heads, head_dim] f32,
 * page_table [seqs, max_pages] i32, lens [seqs] i32 (context length
 * including the rows, already appended), row_starts [seqs + 1] i32. All
 * device pointers; lens, row_starts and the page table must be consistent
 * (only sizes are checked). Fails on libraries built without prefill
 * functions. */
int condensate_gpu_prefill(condensate_gpu_program *program, int64_t layer,
                           int64_t rows, int64_t seqs, int64_t max_pages,
                           int64_t num_pages, const void *q,
                           const void *k_cache, const void *v_cache,
                           const void *page_table, const void *lens,
                           const void *row_starts, void *out, void *stream,
                           char *error, size_t error_size);

/* A JSON description of the program (condensate::describeModelJSON: model
 * shape, schedule, summary rows, which layers take per-sequence windows,
 * stats columns) in `*json`, a NUL-terminated buffer the caller releases
 * with condensate_free. */
int condensate_gpu_describe(condensate_gpu_program *program, char **json,
                            char *error, size_t error_size);

/* Releases a buffer a condensate_* function returned. */
void condensate_free(void *buffer);

/* Number of kernel launches one attend of `layer` makes. */
int condensate_gpu_launch_count(condensate_gpu_program *program,
                                int64_t layer);

#ifdef __cplusplus
}
#endif

#endif /* CONDENSATE_RUNTIME_CONDENSATE_C_H */
