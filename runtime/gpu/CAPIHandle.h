//===- CAPIHandle.h - the C API's program handle ----------------*- C++ -*-===//
//
// Internal to the runtime and compiler libraries: what a
// condensate_gpu_program is, and how a Status reaches a C caller.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_GPU_CAPIHANDLE_H
#define CONDENSATE_RUNTIME_GPU_CAPIHANDLE_H

#include "condensate/Runtime/Attention.h"
#include "condensate/Runtime/GPUProgram.h"
#include "condensate/Runtime/condensate_c.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>

struct condensate_gpu_program {
  std::unique_ptr<condensate::GPUProgram> program;
};

namespace condensate::capi {

/// Copies the message of `st` into `error` (NUL-terminated, truncated to
/// `size`) and returns the C API's failure code.
inline int fail(const Status &st, char *error, size_t size) {
  if (error && size > 0) {
    std::strncpy(error, st.message().c_str(), size - 1);
    error[size - 1] = '\0';
  }
  return 1;
}

/// The C API's attention arguments as the runtime's.
inline AttentionArgs attentionArgs(int64_t batch, int64_t maxPages,
                                   int64_t numPages, const void *q,
                                   const void *k, const void *v,
                                   const void *pt, const void *lens,
                                   const void *windows, const void *summaries,
                                   void *out, void *stats) {
  AttentionArgs a;
  a.batch = batch;
  a.maxPages = maxPages;
  a.numPages = numPages;
  a.q = static_cast<const float *>(q);
  a.kCache = k;
  a.vCache = v;
  a.pageTable = static_cast<const int32_t *>(pt);
  a.lens = static_cast<const int32_t *>(lens);
  a.windows = static_cast<const int32_t *>(windows);
  a.summaries = static_cast<const float *>(summaries);
  a.out = static_cast<float *>(out);
  a.stats = static_cast<float *>(stats);
  return a;
}

/// The C API's append arguments as the runtime's.
inline AppendArgs appendArgs(int64_t batch, int64_t maxPages,
                             int64_t numPages, const void *kNew,
                             const void *vNew, void *kCache, void *vCache,
                             const void *pt, const void *positions,
                             void *summaries) {
  AppendArgs a;
  a.batch = batch;
  a.maxPages = maxPages;
  a.numPages = numPages;
  a.kNew = static_cast<const float *>(kNew);
  a.vNew = static_cast<const float *>(vNew);
  a.kCache = kCache;
  a.vCache = vCache;
  a.pageTable = static_cast<const int32_t *>(pt);
  a.positions = static_cast<const int32_t *>(positions);
  a.summaries = static_cast<float *>(summaries);
  return a;
}

/// The C API's prefill arguments as the runtime's.
inline PrefillArgs prefillArgs(int64_t rows, int64_t seqs, int64_t maxPages,
                               int64_t numPages, const void *q, const void *k,
                               const void *v, const void *pt, const void *lens,
                               const void *rowStarts, void *out) {
  PrefillArgs a;
  a.rows = rows;
  a.seqs = seqs;
  a.maxPages = maxPages;
  a.numPages = numPages;
  a.q = static_cast<const float *>(q);
  a.kCache = k;
  a.vCache = v;
  a.pageTable = static_cast<const int32_t *>(pt);
  a.lens = static_cast<const int32_t *>(lens);
  a.rowStarts = static_cast<const int32_t *>(rowStarts);
  a.out = static_cast<float *>(out);
  return a;
}

/// `text` in a malloc'd NUL-terminated buffer (condensate_free releases
/// it), or an error when there is no memory for it.
inline int copyOut(const std::string &text, char **out, char *error,
                   size_t size) {
  if (!out)
    return fail(Status::error("null output pointer"), error, size);
  char *buf = static_cast<char *>(std::malloc(text.size() + 1));
  if (!buf)
    return fail(Status::error("out of memory for a " +
                              std::to_string(text.size()) + "-byte result"),
                error, size);
  std::memcpy(buf, text.c_str(), text.size() + 1);
  *out = buf;
  return 0;
}

} // namespace condensate::capi

#endif // CONDENSATE_RUNTIME_GPU_CAPIHANDLE_H
