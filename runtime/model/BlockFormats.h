//===- BlockFormats.h - Reading ggml's quantised blocks -------------------===//
//
// Private to runtime/model/: the little-endian loads, the half-precision
// scale and the packed K-quant scales that Dequant.cpp (blocks to float32)
// and QuantDot.cpp (blocks dotted with float32 rows) both read. The block
// layouts themselves are ggml's (ggml-common.h), written once beside each
// decoder in Dequant.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_MODEL_BLOCKFORMATS_H
#define CONDENSATE_RUNTIME_MODEL_BLOCKFORMATS_H

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error                                                                         \
    "GGUF tensors are little-endian; this decoder assumes a little-endian host"
#endif

namespace condensate::model::detail {

constexpr int64_t kQK = 32;   // Elements per block of the simple formats.
constexpr int64_t kQKK = 256; // Elements per K-quant super-block.

inline uint16_t loadU16(const uint8_t *p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint32_t loadU32(const uint8_t *p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// IEEE binary16 to binary32, exact for every input including subnormals,
/// infinities and NaNs.
inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline float loadHalf(const uint8_t *p) { return halfToFloat(loadU16(p)); }

/// Scale and min of sub-block `j` (0..7) from the 12-byte packed 6-bit
/// scales of Q4_K/Q5_K (ggml's get_scale_min_k4).
inline void scaleMinK4(int j, const uint8_t *q, uint8_t &d, uint8_t &m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

} // namespace condensate::model::detail

#endif // CONDENSATE_RUNTIME_MODEL_BLOCKFORMATS_H
