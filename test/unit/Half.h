//===- Half.h - float16/bfloat16 conversions for tests ----------*- C++ -*-===//
//
// Round-to-nearest-even conversions between float and the 16-bit KV storage
// types, written independently of the compiler for the tests' reference.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_HALF_H
#define CONDENSATE_TEST_HALF_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace condensate::test {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t floatToBF16(float f) {
  uint32_t u = bitsOf(f);
  if (std::isnan(f))
    return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16ToFloat(uint16_t h) { return floatOf(uint32_t(h) << 16); }

inline float halfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}
/// Round to nearest even, through the exact value of each candidate.
inline uint16_t floatToHalf(float f) {
  if (std::isnan(f))
    return 0x7e00;
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  float a = std::fabs(f);
  if (a >= 65520.0f)
    return sign | 0x7c00;
  // Candidates: truncation and the next representable value.
  uint16_t lo = 0;
  {
    // Binary search over magnitudes (monotone in the bit pattern).
    uint16_t l = 0, r = 0x7bff;
    while (l < r) {
      uint16_t mid = static_cast<uint16_t>((l + r + 1) / 2);
      if (halfToFloat(mid) <= a)
        l = mid;
      else
        r = static_cast<uint16_t>(mid - 1);
    }
    lo = l;
  }
  if (halfToFloat(lo) == a || lo == 0x7bff)
    return sign | lo;
  uint16_t hi = static_cast<uint16_t>(lo + 1);
  float dl = a - halfToFloat(lo), dh = halfToFloat(hi) - a;
  uint16_t pick = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
  return sign | pick;
}

} // namespace condensate::test

#endif // CONDENSATE_TEST_HALF_H
