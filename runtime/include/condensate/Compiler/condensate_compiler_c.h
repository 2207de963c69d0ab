/*===- condensate_compiler_c.h - C API of the condensate compiler ---------===*
 *
 * The C entry points that need the compiler library (libCondensateCompiler):
 * compile a model in-process and load it as a program of the runtime's C
 * API (condensate/Runtime/condensate_c.h), build a model's op text from a
 * shape and a schedule, and run a model's attention (decode and prefill)
 * and KV append on the CPU.
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

/* The condensate.model op text for a model shape and a schedule:
 * `shape_json` as condensate::parseModelShapeJSON reads it ({"layers",
 * "q_heads", "kv_heads", "head_dim", "page_size", "kv_type", "scale",
 * "sketch_bits"}), `schedule` as JSON, MLIR attribute text or a
 * condensate.model op. The sketch width comes from the schedule when the
 * shape has none. `*model_mlir` is released with condensate_free. */
int condensate_model_text(const char *shape_json, const char *schedule,
                          char **model_mlir, char *error, size_t error_size);

/* CPU programs: the model's attention compiled in-process for this CPU
 * (JIT, cached in memory by the model text). Buffers are host memory with
 * the layouts of condensate/ABI/AttentionABI.h; every call checks its
 * arguments (sizes, lengths, page-table entries, finite appended keys)
 * before it runs. */
typedef struct condensate_cpu_program condensate_cpu_program;

int condensate_cpu_compile(const char *model_mlir,
                           condensate_cpu_program **program, double *seconds,
                           char *error, size_t error_size);

void condensate_cpu_free(condensate_cpu_program *program);

/* As condensate_gpu_describe. */
int condensate_cpu_describe(condensate_cpu_program *program, char **json,
                            char *error, size_t error_size);

int condensate_cpu_attend(condensate_cpu_program *program, int64_t layer,
                          int64_t batch, int64_t max_pages, int64_t num_pages,
                          const void *q, const void *k_cache,
                          const void *v_cache, const void *page_table,
                          const void *lens, const void *windows,
                          const void *summaries, void *out, void *stats,
                          char *error, size_t error_size);

/* Prefill (causal) attention of `layer` on host buffers, as
 * condensate_gpu_prefill: q, out [rows, q_heads, head_dim] f32, page_table
 * [seqs, max_pages] i32, lens [seqs] i32 (context length including the
 * rows, already appended), row_starts [seqs + 1] i32. Also checks that the
 * row starts partition [0, rows), that no sequence has more rows than
 * positions, and every length and referenced page. */
int condensate_cpu_prefill(condensate_cpu_program *program, int64_t layer,
                           int64_t rows, int64_t seqs, int64_t max_pages,
                           int64_t num_pages, const void *q,
                           const void *k_cache, const void *v_cache,
                           const void *page_table, const void *lens,
                           const void *row_starts, void *out, char *error,
                           size_t error_size);

int condensate_cpu_append(condensate_cpu_program *program, int64_t batch,
                          int64_t max_pages, int64_t num_pages,
                          const void *k_new, const void *v_new, void *k_cache,
                          void *v_cache, const void *page_table,
                          const void *positions, void *summaries, char *error,
                          size_t error_size);

/* Bytes of the KV cache one decode-attention call of `layer` read, from
 * the call's own statistics: `lens` [batch] i32 and `stats` [batch, q_heads,
 * 5] f32 as the call wrote them, both host memory, for the condensate.model
 * op in `model_mlir`. `*bytes` receives what the generated stages read
 * (summaries and sketches scored, K rows scored exactly, K and V attended,
 * value boxes, the sparse and the dense pass of a fallback: the decoder's
 * "bytes read", condensate::bytesRead), `*dense_bytes` what dense
 * attention reads over the same contexts (K and V once); both summed over
 * the batch. */
int condensate_bytes_read(const char *model_mlir, int64_t layer, int64_t batch,
                          const int32_t *lens, const float *stats,
                          double *bytes, double *dense_bytes, char *error,
                          size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* CONDENSATE_COMPILER_CONDENSATE_COMPILER_C_H */
