/*===- decode.c - an AOT kernel library from plain C ---------------------===*
 *
 * What an engine does with condensate, in C: load an AOT library
 * (condensate-translate examples/c/spec.json --chip=sm_80,sm_90: one image
 * per chip, the runtime picks this GPU's) with the MLIR-free runtime, append a paged KV cache token by token on the GPU,
 * run decode attention of a dense layer and of a certified key-sketch
 * layer, and check both against a float64 reference on the host: the dense
 * layer to 1e-5, the certified layer within the output bound it reports.
 *
 *   condensate-c-example LIBRARY.json
 *
 * Exit 0 when every check holds, 1 on a failure, 77 when there is no GPU.
 *
 *===----------------------------------------------------------------------===*/
#include "condensate/Runtime/condensate_c.h"

#include <cuda_runtime_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shape examples/c/spec.json describes (checked against the library). */
enum { HQ = 8, HKV = 2, D = 64, P = 16, LAYERS = 2, STATS = 5 };
enum { B = 2, MAXP = 16 };
static const int kLens[B] = {200, 57};

#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
              cudaGetErrorString(err_));                                       \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define CONDENSATE_CHECK(call)                                                 \
  do {                                                                         \
    if ((call) != 0) {                                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, error);               \
      return 1;                                                                \
    }                                                                          \
  } while (0)

static uint64_t rngState = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* xorshift64*, in [-1, 1) */
  rngState ^= rngState >> 12;
  rngState ^= rngState << 25;
  rngState ^= rngState >> 27;
  return (float)((rngState * 2685821657736338717ull) >> 40) / (float)(1 << 23) -
         1.0f;
}

/* Float64 dense attention of query head h of sequence b. */
static void reference(const float *q, const float *keys, const float *values,
                      int b, int h, int n, double *out) {
  int g = h / (HQ / HKV);
  double m = -INFINITY, z = 0.0;
  double *logit = malloc(sizeof(double) * (size_t)n);
  for (int t = 0; t < n; ++t) {
    const float *k = keys + (((size_t)b * 1024 + t) * HKV + g) * D;
    double s = 0.0;
    for (int c = 0; c < D; ++c)
      s += (double)q[(b * HQ + h) * D + c] * k[c];
    logit[t] = s / sqrt((double)D);
    if (logit[t] > m)
      m = logit[t];
  }
  for (int c = 0; c < D; ++c)
    out[c] = 0.0;
  for (int t = 0; t < n; ++t) {
    double w = exp(logit[t] - m);
    const float *v = values + (((size_t)b * 1024 + t) * HKV + g) * D;
    z += w;
    for (int c = 0; c < D; ++c)
      out[c] += w * v[c];
  }
  for (int c = 0; c < D; ++c)
    out[c] /= z;
  free(logit);
}

int main(int argc, char **argv) {
  char error[512] = "";
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY.json (an AOT library's manifest or fat index)\n",
            argv[0]);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("skipped: no CUDA device\n");
    return 77;
  }
  condensate_gpu_program *program = NULL;
  CONDENSATE_CHECK(condensate_gpu_load_library(argv[1], &program, error, sizeof error));
  char *description = NULL;
  CONDENSATE_CHECK(condensate_gpu_describe(program, &description, error, sizeof error));
  if (!strstr(description, "\"q_heads\":8") || !strstr(description, "\"kv_heads\":2") ||
      !strstr(description, "\"head_dim\":64") || !strstr(description, "\"sketch_bits\":4")) {
    fprintf(stderr, "the library is not examples/c/spec.json's shape: %s\n", description);
    return 1;
  }
  /* summary_rows: 5 box rows plus the 4-bit codes of 16 tokens per page. */
  const char *rows = strstr(description, "\"summary_rows\":");
  int R = rows ? atoi(rows + strlen("\"summary_rows\":")) : 0;
  condensate_free(description);
  if (R < 5) {
    fprintf(stderr, "no summary_rows in the description\n");
    return 1;
  }

  /* A page pool: sequence b owns pages b * MAXP ... in its page table. */
  const int numPages = B * MAXP;
  int32_t table[B * MAXP];
  for (int i = 0; i < B * MAXP; ++i)
    table[i] = i;
  size_t kvBytes = sizeof(float) * (size_t)numPages * HKV * P * D;
  size_t sumBytes = sizeof(float) * (size_t)numPages * HKV * (size_t)R * D;
  float *k, *v, *summaries, *q, *out, *stats, *kNew, *vNew;
  int32_t *pageTable, *lens, *positions;
  CUDA_CHECK(cudaMalloc((void **)&k, kvBytes));
  CUDA_CHECK(cudaMalloc((void **)&v, kvBytes));
  CUDA_CHECK(cudaMalloc((void **)&summaries, sumBytes));
  CUDA_CHECK(cudaMalloc((void **)&q, sizeof(float) * B * HQ * D));
  CUDA_CHECK(cudaMalloc((void **)&out, sizeof(float) * B * HQ * D));
  CUDA_CHECK(cudaMalloc((void **)&stats, sizeof(float) * B * HQ * STATS));
  CUDA_CHECK(cudaMalloc((void **)&kNew, sizeof(float) * B * HKV * D));
  CUDA_CHECK(cudaMalloc((void **)&vNew, sizeof(float) * B * HKV * D));
  CUDA_CHECK(cudaMalloc((void **)&pageTable, sizeof table));
  CUDA_CHECK(cudaMalloc((void **)&lens, sizeof(int32_t) * B));
  CUDA_CHECK(cudaMalloc((void **)&positions, sizeof(int32_t) * B));
  CUDA_CHECK(cudaMemcpy(pageTable, table, sizeof table, cudaMemcpyHostToDevice));
  CONDENSATE_CHECK(condensate_gpu_reserve(program, B, MAXP, numPages, error, sizeof error));

  /* Host copies of what was appended: [b][t][g][c], 1024 positions a sequence. */
  float *keys = calloc((size_t)B * 1024 * HKV * D, sizeof(float));
  float *values = calloc((size_t)B * 1024 * HKV * D, sizeof(float));
  float hostK[B * HKV * D], hostV[B * HKV * D];
  /* Sequences are ordered by length (kLens descending), so the ones still
   * growing at a position are the first `live` rows of the page table. */
  for (int pos = 0; pos < kLens[0]; ++pos) {
    int32_t at[B];
    int live = 0;
    for (int b = 0; b < B && pos < kLens[b]; ++b, ++live) {
      at[b] = pos;
      float *kk = keys + ((size_t)b * 1024 + pos) * HKV * D;
      float *vv = values + ((size_t)b * 1024 + pos) * HKV * D;
      for (int i = 0; i < HKV * D; ++i) {
        hostK[b * HKV * D + i] = kk[i] = uniform();
        hostV[b * HKV * D + i] = vv[i] = uniform();
      }
    }
    CUDA_CHECK(cudaMemcpy(kNew, hostK, sizeof(float) * live * HKV * D,
                          cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(vNew, hostV, sizeof(float) * live * HKV * D,
                          cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(positions, at, sizeof(int32_t) * live, cudaMemcpyHostToDevice));
    CONDENSATE_CHECK(condensate_gpu_append(program, live, MAXP, numPages, kNew, vNew, k,
                                           v, pageTable, positions, summaries, NULL,
                                           error, sizeof error));
  }

  float hostQ[B * HQ * D];
  for (int i = 0; i < B * HQ * D; ++i)
    hostQ[i] = 2.0f * uniform();
  CUDA_CHECK(cudaMemcpy(q, hostQ, sizeof hostQ, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(lens, kLens, sizeof kLens, cudaMemcpyHostToDevice));

  int failures = 0;
  for (int layer = 0; layer < LAYERS; ++layer) {
    CONDENSATE_CHECK(condensate_gpu_attend(program, layer, B, MAXP, numPages, q, k, v,
                                           pageTable, lens, NULL, summaries, out, stats,
                                           NULL, error, sizeof error));
    float hostOut[B * HQ * D], hostStats[B * HQ * STATS];
    CUDA_CHECK(cudaMemcpy(hostOut, out, sizeof hostOut, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hostStats, stats, sizeof hostStats, cudaMemcpyDeviceToHost));
    int certified = 0, fallbacks = 0;
    double worst = 0.0;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < HQ; ++h) {
        double ref[D], err = 0.0, norm = 0.0;
        reference(hostQ, keys, values, b, h, kLens[b], ref);
        for (int c = 0; c < D; ++c) {
          double e = hostOut[(b * HQ + h) * D + c] - ref[c];
          err += e * e;
          norm += ref[c] * ref[c];
        }
        err = sqrt(err);
        norm = sqrt(norm);
        const float *st = hostStats + (b * HQ + h) * STATS;
        double allowed = layer == 0 || st[3] != 0.0f
                             ? 1e-5 * (norm > 1.0 ? norm : 1.0)
                             : st[4] * (1.0 + 1e-3) + 2e-6 * (norm > 1.0 ? norm : 1.0);
        if (layer == 1 && st[3] != 0.0f)
          ++fallbacks;
        else if (layer == 1)
          ++certified;
        if (!(err <= allowed)) {
          fprintf(stderr, "layer %d b=%d h=%d: ||o - dense|| = %g > %g (eps_hat %g)\n",
                  layer, b, h, err, allowed, st[0]);
          ++failures;
        }
        if (err / (norm > 0 ? norm : 1) > worst)
          worst = err / (norm > 0 ? norm : 1);
      }
    if (layer == 0)
      printf("layer 0 (dense): worst relative error %.2e against float64\n", worst);
    else
      printf("layer 1 (certified 4-bit sketch): %d heads certified, %d fell back, "
             "worst relative distance to dense %.2e, every certified head within "
             "its output bound\n",
             certified, fallbacks, worst);
  }

  free(keys);
  free(values);
  cudaFree(k);
  cudaFree(v);
  cudaFree(summaries);
  cudaFree(q);
  cudaFree(out);
  cudaFree(stats);
  cudaFree(kNew);
  cudaFree(vNew);
  cudaFree(pageTable);
  cudaFree(lens);
  cudaFree(positions);
  condensate_gpu_free(program);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
