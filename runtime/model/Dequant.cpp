//===- Dequant.cpp - ggml tensor types and their float32 decoders ---------===//
//
// Block layouts are ggml's (ggml-common.h) and the decoders follow
// dequantize_row_* in ggml-quants.c operation for operation, so results are
// bit-identical to ggml when built without floating-point contraction
// (CMakeLists.txt passes -ffp-contract=off for this file).
//
//===----------------------------------------------------------------------===//

#include "BlockFormats.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Support/BFloat16.h"
#include "condensate/Support/Vectorize.h"

#include <cmath>
#include <cstring>

namespace condensate::model {

namespace {

using namespace detail;

constexpr GGMLTypeTraits kTypeTraits[] = {
    {GGMLType::F32, "F32", 1, 4, true},
    {GGMLType::F16, "F16", 1, 2, true},
    {GGMLType::Q4_0, "Q4_0", 32, 18, true},
    {GGMLType::Q4_1, "Q4_1", 32, 20, true},
    {GGMLType::Q5_0, "Q5_0", 32, 22, true},
    {GGMLType::Q5_1, "Q5_1", 32, 24, true},
    {GGMLType::Q8_0, "Q8_0", 32, 34, true},
    {GGMLType::Q8_1, "Q8_1", 32, 36, false},
    {GGMLType::Q2_K, "Q2_K", 256, 84, false},
    {GGMLType::Q3_K, "Q3_K", 256, 110, false},
    {GGMLType::Q4_K, "Q4_K", 256, 144, true},
    {GGMLType::Q5_K, "Q5_K", 256, 176, true},
    {GGMLType::Q6_K, "Q6_K", 256, 210, true},
    {GGMLType::Q8_K, "Q8_K", 256, 292, false},
    {GGMLType::IQ2_XXS, "IQ2_XXS", 256, 66, false},
    {GGMLType::IQ2_XS, "IQ2_XS", 256, 74, false},
    {GGMLType::IQ3_XXS, "IQ3_XXS", 256, 98, false},
    {GGMLType::IQ1_S, "IQ1_S", 256, 50, false},
    {GGMLType::IQ4_NL, "IQ4_NL", 32, 18, false},
    {GGMLType::IQ3_S, "IQ3_S", 256, 110, false},
    {GGMLType::IQ2_S, "IQ2_S", 256, 82, false},
    {GGMLType::IQ4_XS, "IQ4_XS", 256, 136, false},
    {GGMLType::I8, "I8", 1, 1, false},
    {GGMLType::I16, "I16", 1, 2, false},
    {GGMLType::I32, "I32", 1, 4, false},
    {GGMLType::I64, "I64", 1, 8, false},
    {GGMLType::F64, "F64", 1, 8, false},
    {GGMLType::IQ1_M, "IQ1_M", 256, 56, false},
    {GGMLType::BF16, "BF16", 1, 2, true},
    {GGMLType::TQ1_0, "TQ1_0", 256, 54, false},
    {GGMLType::TQ2_0, "TQ2_0", 256, 66, false},
    {GGMLType::MXFP4, "MXFP4", 32, 17, false},
};

// Each decoder turns `numBlocks` consecutive blocks at `x` into floats at `y`.

void decodeF32(const uint8_t *x, int64_t n, float *y) {
  std::memcpy(y, x, size_t(n) * sizeof(float));
}

CONDENSATE_AVX2_CLONES void decodeF16(const uint8_t *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = loadHalf(x + 2 * i);
}

CONDENSATE_AVX2_CLONES void decodeBF16(const uint8_t *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = bf16ToFloat(loadU16(x + 2 * i));
}

// block_q4_0: half d; uint8 qs[16]. Low nibbles are elements 0..15.
CONDENSATE_AVX2_CLONES void decodeQ4_0(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 18, y += kQK) {
    const float d = loadHalf(x);
    const uint8_t *qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      const int x0 = (qs[j] & 0x0F) - 8;
      const int x1 = (qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + 16] = x1 * d;
    }
  }
}

// block_q4_1: half d; half m; uint8 qs[16].
CONDENSATE_AVX2_CLONES void decodeQ4_1(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 20, y += kQK) {
    const float d = loadHalf(x);
    const float m = loadHalf(x + 2);
    const uint8_t *qs = x + 4;
    for (int j = 0; j < 16; ++j) {
      const int x0 = qs[j] & 0x0F;
      const int x1 = qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + 16] = x1 * d + m;
    }
  }
}

// block_q5_0: half d; uint8 qh[4] (5th bits); uint8 qs[16].
CONDENSATE_AVX2_CLONES void decodeQ5_0(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 22, y += kQK) {
    const float d = loadHalf(x);
    const uint32_t qh = loadU32(x + 2);
    const uint8_t *qs = x + 6;
    for (int j = 0; j < 16; ++j) {
      const uint8_t xh0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh1 = ((qh >> (j + 12))) & 0x10;
      const int32_t x0 = ((qs[j] & 0x0F) | xh0) - 16;
      const int32_t x1 = ((qs[j] >> 4) | xh1) - 16;
      y[j] = x0 * d;
      y[j + 16] = x1 * d;
    }
  }
}

// block_q5_1: half d; half m; uint8 qh[4]; uint8 qs[16].
CONDENSATE_AVX2_CLONES void decodeQ5_1(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 24, y += kQK) {
    const float d = loadHalf(x);
    const float m = loadHalf(x + 2);
    const uint32_t qh = loadU32(x + 4);
    const uint8_t *qs = x + 8;
    for (int j = 0; j < 16; ++j) {
      const uint8_t xh0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh1 = ((qh >> (j + 12))) & 0x10;
      const int x0 = (qs[j] & 0x0F) | xh0;
      const int x1 = (qs[j] >> 4) | xh1;
      y[j] = x0 * d + m;
      y[j + 16] = x1 * d + m;
    }
  }
}

// block_q8_0: half d; int8 qs[32].
CONDENSATE_AVX2_CLONES void decodeQ8_0(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 34, y += kQK) {
    const float d = loadHalf(x);
    const int8_t *qs = reinterpret_cast<const int8_t *>(x + 2);
    for (int j = 0; j < kQK; ++j)
      y[j] = qs[j] * d;
  }
}

// block_q4_K: half d; half dmin; uint8 scales[12]; uint8 qs[128].
CONDENSATE_AVX2_CLONES void decodeQ4_K(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 144) {
    const float d = loadHalf(x);
    const float min = loadHalf(x + 2);
    const uint8_t *scales = x + 4;
    const uint8_t *q = x + 16;
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < kQKK; j += 64) {
      scaleMinK4(is + 0, scales, sc, m);
      const float d1 = d * sc;
      const float m1 = min * m;
      scaleMinK4(is + 1, scales, sc, m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

// block_q5_K: half d; half dmin; uint8 scales[12]; uint8 qh[32];
// uint8 qs[128].
CONDENSATE_AVX2_CLONES void decodeQ5_K(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 176) {
    const float d = loadHalf(x);
    const float min = loadHalf(x + 2);
    const uint8_t *scales = x + 4;
    const uint8_t *qh = x + 16;
    const uint8_t *ql = x + 48;
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQKK; j += 64) {
      scaleMinK4(is + 0, scales, sc, m);
      const float d1 = d * sc;
      const float m1 = min * m;
      scaleMinK4(is + 1, scales, sc, m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

// block_q6_K: uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d.
CONDENSATE_AVX2_CLONES void decodeQ6_K(const uint8_t *x, int64_t numBlocks,
                                       float *y) {
  for (int64_t i = 0; i < numBlocks; ++i, x += 210) {
    const uint8_t *ql = x;
    const uint8_t *qh = x + 128;
    const int8_t *sc = reinterpret_cast<const int8_t *>(x + 192);
    const float d = loadHalf(x + 208);
    for (int n = 0; n < kQKK; n += 128) {
      // ggml's d * sc[is] * q with the product d * sc[is] (is = l / 16)
      // taken once per 16 elements: the same roundings, in a loop the
      // compiler vectorises.
      for (int is = 0; is < 2; ++is) {
        const float d1 = d * sc[is + 0], d2 = d * sc[is + 2],
                    d3 = d * sc[is + 4], d4 = d * sc[is + 6];
        for (int l = 16 * is; l < 16 * is + 16; ++l) {
          const int8_t q1 =
              int8_t((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int8_t q2 =
              int8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int8_t q3 =
              int8_t((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int8_t q4 =
              int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l + 0] = d1 * q1;
          y[l + 32] = d2 * q2;
          y[l + 64] = d3 * q3;
          y[l + 96] = d4 * q4;
        }
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

} // namespace

const GGMLTypeTraits *ggmlTypeTraits(uint32_t code) {
  for (const GGMLTypeTraits &traits : kTypeTraits)
    if (static_cast<uint32_t>(traits.type) == code)
      return &traits;
  return nullptr;
}

std::string ggmlTypeName(uint32_t code) {
  if (const GGMLTypeTraits *traits = ggmlTypeTraits(code))
    return traits->name;
  return "type" + std::to_string(code);
}

Status dequantize(GGMLType type, const void *src, size_t srcBytes,
                  int64_t numElements, float *out) {
  const GGMLTypeTraits *traits = ggmlTypeTraits(static_cast<uint32_t>(type));
  if (!traits)
    return Status::error("dequantize: unknown tensor type " +
                         ggmlTypeName(type));
  if (!traits->dequantizable)
    return Status::error("dequantize: decoding " + std::string(traits->name) +
                         " tensors is not supported");
  if (numElements < 0 || numElements % traits->blockSize != 0)
    return Status::error("dequantize: " + std::to_string(numElements) +
                         " elements is not a whole number of " +
                         traits->name + " blocks of " +
                         std::to_string(traits->blockSize));
  const int64_t numBlocks = numElements / traits->blockSize;
  if (uint64_t(numBlocks) > srcBytes / uint64_t(traits->blockBytes))
    return Status::error("dequantize: " + std::to_string(numElements) + " " +
                         traits->name + " elements need " +
                         std::to_string(uint64_t(numBlocks) *
                                        uint64_t(traits->blockBytes)) +
                         " bytes, source has " + std::to_string(srcBytes));
  if (numBlocks == 0)
    return Status::success();
  if (!src || !out)
    return Status::error("dequantize: null source or destination");

  const auto *x = static_cast<const uint8_t *>(src);
  switch (type) {
  case GGMLType::F32:
    decodeF32(x, numBlocks, out);
    break;
  case GGMLType::F16:
    decodeF16(x, numBlocks, out);
    break;
  case GGMLType::BF16:
    decodeBF16(x, numBlocks, out);
    break;
  case GGMLType::Q4_0:
    decodeQ4_0(x, numBlocks, out);
    break;
  case GGMLType::Q4_1:
    decodeQ4_1(x, numBlocks, out);
    break;
  case GGMLType::Q5_0:
    decodeQ5_0(x, numBlocks, out);
    break;
  case GGMLType::Q5_1:
    decodeQ5_1(x, numBlocks, out);
    break;
  case GGMLType::Q8_0:
    decodeQ8_0(x, numBlocks, out);
    break;
  case GGMLType::Q4_K:
    decodeQ4_K(x, numBlocks, out);
    break;
  case GGMLType::Q5_K:
    decodeQ5_K(x, numBlocks, out);
    break;
  case GGMLType::Q6_K:
    decodeQ6_K(x, numBlocks, out);
    break;
  default:
    return Status::error("dequantize: decoding " + std::string(traits->name) +
                         " tensors is not supported");
  }
  return Status::success();
}

} // namespace condensate::model
