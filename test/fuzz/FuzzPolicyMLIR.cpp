//===- FuzzPolicyMLIR.cpp - libFuzzer target: MLIR policy and model text --===//
//
// Any text is a candidate policy, schedule or condensate.model op in MLIR
// form, read through the compiler library (the dialect's parser and
// verifiers). The compiler library is not instrumented, so coverage
// guidance comes from this file only; crashes, hangs and runaway
// allocation are still found.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"

#include <cstdint>
#include <string>

using namespace condensate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  auto s = parseSchedule(text, 8, "fuzz.mlir");
  if (s.ok())
    (void)s->toMLIR();
  if (text.find("condensate.model") != std::string::npos) {
    auto m = parseModel(text, "fuzz.mlir");
    (void)m.ok();
  }
  return 0;
}
