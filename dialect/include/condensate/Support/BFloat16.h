//===- BFloat16.h - float32 to bfloat16 and back, on the host ---*- C++ -*-===//
//
// A bfloat16 is the top half of a float32: sign, the same 8 exponent bits,
// 7 of the 23 mantissa bits (8 significant bits). Rounding to it is
// round-to-nearest-even on the 16 bits dropped, as the GPU's cvt.rn.bf16.f32
// (MLIR's arith.truncf) does, so weights rounded here and activations
// rounded on the device round alike; a NaN stays a NaN (quiet, its sign
// kept), which the rounding add alone would not guarantee.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_SUPPORT_BFLOAT16_H
#define CONDENSATE_SUPPORT_BFLOAT16_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace condensate {

/// `f` rounded to the nearest bfloat16, ties to even; past the largest
/// finite bfloat16 (by half a unit or more) it is an infinity.
inline uint16_t floatToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16ToFloat(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// out[i] = floatToBF16(in[i]) for i < n.
inline void floatsToBF16(const float *in, size_t n, uint16_t *out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = floatToBF16(in[i]);
}

} // namespace condensate

#endif // CONDENSATE_SUPPORT_BFLOAT16_H
