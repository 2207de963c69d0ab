//===- FuzzPolicyJSON.cpp - libFuzzer target: policies, schedules, shapes -===//
//
// Any text is a candidate policy, schedule or {"model", "schedule"} spec in
// JSON: parse it, validate it, print it back and parse that again (which
// must succeed and describe the same schedule).
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Policy.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace condensate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  for (int64_t layers : {1, 7, 64}) {
    auto s = parseScheduleJSON(text, layers);
    if (!s.ok())
      continue;
    auto again = parseScheduleJSON(scheduleToJSON(*s), layers);
    if (!again.ok())
      std::abort(); // printing must round-trip
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t h = 0; h < 4; ++h)
        if (!(s->policyFor(l, h) == again->policyFor(l, h)))
          std::abort();
    (void)s->toMLIR();
  }
  auto spec = parseModelSpecJSON(text, "fuzz.json");
  if (spec.ok()) {
    (void)modelToMLIR("m", spec->shape, spec->schedule);
    if (!parseModelShapeJSON(modelShapeToJSON(spec->shape)).ok())
      std::abort();
  }
  return 0;
}
