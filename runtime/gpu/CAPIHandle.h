//===- CAPIHandle.h - the C API's program handle ----------------*- C++ -*-===//
//
// Internal to the runtime and compiler libraries: what a
// condensate_gpu_program is, and how a Status reaches a C caller.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_GPU_CAPIHANDLE_H
#define CONDENSATE_RUNTIME_GPU_CAPIHANDLE_H

#include "condensate/Runtime/GPUProgram.h"
#include "condensate/Runtime/condensate_c.h"

#include <cstring>
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

} // namespace condensate::capi

#endif // CONDENSATE_RUNTIME_GPU_CAPIHANDLE_H
