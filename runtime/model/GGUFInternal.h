//===- GGUFInternal.h - What the GGUF sources share -----------------------===//
//
// Private to runtime/model/: how scalar values are encoded, overflow-checked
// arithmetic and how names are quoted in messages, used by GGUFValue.cpp,
// GGUFParser.cpp and GGUFFile.cpp alike.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_MODEL_GGUFINTERNAL_H
#define CONDENSATE_RUNTIME_MODEL_GGUFINTERNAL_H

#include "condensate/Model/GGUF.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace condensate::model::detail {

/// Size of a fixed-size scalar value type; 0 for string, array and unknown.
uint64_t scalarBytes(ValueType type);

/// Decodes a little-endian scalar of `type` at `p` into Value's 64-bit
/// payload: integers sign- or zero-extended, floats widened to double bits.
uint64_t loadScalarBits(ValueType type, const uint8_t *p);

/// `s` in single quotes, with control characters, quotes and backslashes
/// escaped as \xNN.
std::string quoted(std::string_view s);

inline std::string u64(uint64_t v) { return std::to_string(v); }

inline bool mulOverflows(uint64_t a, uint64_t b, uint64_t &out) {
  return __builtin_mul_overflow(a, b, &out);
}
inline bool addOverflows(uint64_t a, uint64_t b, uint64_t &out) {
  return __builtin_add_overflow(a, b, &out);
}

} // namespace condensate::model::detail

#endif // CONDENSATE_RUNTIME_MODEL_GGUFINTERNAL_H
