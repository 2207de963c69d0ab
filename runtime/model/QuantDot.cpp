//===- QuantDot.cpp - Quantised rows dotted with float32 rows -------------===//
//
// A decode step multiplies every weight matrix by one activation row (or a
// few). Decoding the rows to float32 first (dequantize()) and then taking
// dot products moves each weight three times (quants in, floats out, floats
// in again); here each block's quants are widened in registers and
// multiplied with the activations directly (the -8 / -16 / -32 of the
// signed formats subtracted from the quants as bytes), the block's scale
// applied once to the block's sum and its offset (the "min" of Q4_1 and
// Q4_K) once to the sum of the activations over its 32 elements, which the
// caller computes once a row (blockSums).
//
// The AVX2 + FMA (+ F16C) kernels cover the types of the models this project
// runs (Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q6_K); every other type dotRows() takes, and
// every type on a machine without AVX2, goes through dequantize() a row at
// a time. Results agree with dequantize() and a float32 dot product to
// float32 rounding of sum |w x|, not bit for bit (another summation
// order).
//
//===----------------------------------------------------------------------===//

#include "BlockFormats.h"
#include "condensate/Model/GGUF.h"

#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CONDENSATE_QUANTDOT_AVX2 1
#include <immintrin.h>
#endif

namespace condensate::model {

using namespace detail;

namespace {

/// x . the row of `cols` elements at `src`, through dequantize().
float dotDecoded(GGMLType type, const uint8_t *src, size_t rowBytes,
                 int64_t cols, const float *x) {
  thread_local std::vector<float> row;
  if (row.size() < size_t(cols))
    row.resize(size_t(cols));
  // Type and sizes are the caller's to check (dotRows' contract).
  (void)dequantize(type, src, rowBytes, cols, row.data());
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16)
    for (int k = 0; k < 16; ++k)
      lanes[k] += row[size_t(i + k)] * x[i + k];
  float sum = 0.0f;
  for (; i < cols; ++i)
    sum += row[size_t(i)] * x[i];
  for (float v : lanes)
    sum += v;
  return sum;
}

#ifdef CONDENSATE_QUANTDOT_AVX2
#define AVX2 __attribute__((target("avx2,fma,f16c")))

/// The half-precision scale at p (F16C's conversion, exact like
/// halfToFloat).
AVX2 inline float half(const uint8_t *p) { return _cvtsh_ss(loadU16(p)); }

/// 8 lanes of sum_e q[e] x[e] over the 16 signed bytes q (elements 0..15).
AVX2 inline __m256 dot16(__m128i q, const float *x, __m256 acc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                        _mm256_loadu_ps(x), acc);
  return _mm256_fmadd_ps(
      _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))),
      _mm256_loadu_ps(x + 8), acc);
}

/// 8 lanes of sum_e q[e] x[e] over the 32 signed bytes q.
AVX2 inline __m256 dot32(__m256i q, const float *x) {
  __m256 acc = dot16(_mm256_castsi256_si128(q), x, _mm256_setzero_ps());
  return dot16(_mm256_extracti128_si256(q, 1), x + 16, acc);
}

/// Asks for the cache lines of the block kPrefetchBytes past the one at
/// `b` (`bytes` long): without it the hardware prefetcher left the row
/// walk waiting on memory (SmolLM2's MLP a step: 12.7 -> 6.5 ms with it).
/// A prefetch past the end of the matrix is a hint, never a fault.
constexpr int64_t kPrefetchBytes = 640;
AVX2 inline void prefetchAhead(const uint8_t *b, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char *>(b + kPrefetchBytes + o),
                 _MM_HINT_T0);
}

AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// The 32 nibbles of 16 bytes as bytes: low nibbles are elements 0..15,
/// high nibbles 16..31 (the layout of Q4_0, Q4_1, Q5_0).
AVX2 inline __m256i nibbles(const uint8_t *qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m),
                          _mm_and_si128(q, m));
}

/// Byte e = 0x10 where bit e of `bits` is set, else 0.
AVX2 inline __m256i bitsTo16s(uint32_t bits) {
  // Byte e takes byte e / 8 of `bits`, then tests bit e % 8 of it.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                        0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Each row kernel: x . row over `nb` blocks, xs the sums of x over 32.

// The formats of 32 elements a block with the half-precision scale d at
// byte 0: each gives its block's size, its quants as 32 signed bytes (the
// -8 / -16 of the signed formats applied) and where its half-precision
// offset m is (Q4_1: d * q + m), -1 where it has none.
struct Q4_0 { // d * (q - 8), q a nibble
  static constexpr int64_t kBytes = 18, kMinAt = -1;
  AVX2 static __m256i quants(const uint8_t *b) {
    return _mm256_sub_epi8(nibbles(b + 2), _mm256_set1_epi8(8));
  }
};
struct Q4_1 { // d * q + m
  static constexpr int64_t kBytes = 20, kMinAt = 2;
  AVX2 static __m256i quants(const uint8_t *b) { return nibbles(b + 4); }
};
struct Q5_0 { // d * (q - 16), q a nibble with its fifth bit from qh
  static constexpr int64_t kBytes = 22, kMinAt = -1;
  AVX2 static __m256i quants(const uint8_t *b) {
    return _mm256_sub_epi8(
        _mm256_or_si256(nibbles(b + 6), bitsTo16s(loadU32(b + 2))),
        _mm256_set1_epi8(16));
  }
};
struct Q8_0 { // d * q, q signed
  static constexpr int64_t kBytes = 34, kMinAt = -1;
  AVX2 static __m256i quants(const uint8_t *b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + 2));
  }
};

template <class F>
AVX2 float rowOf32(const uint8_t *b, int64_t nb, const float *x,
                   const float *xs) {
  __m256 acc = _mm256_setzero_ps();
  float off = 0.0f;
  for (int64_t i = 0; i < nb; ++i, b += F::kBytes, x += kQK) {
    prefetchAhead(b, F::kBytes);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half(b)), dot32(F::quants(b), x), acc);
    if constexpr (F::kMinAt >= 0)
      off += half(b + F::kMinAt) * xs[i];
  }
  return hsum(acc) + off;
}

// Q4_K: per 64 elements, 32 bytes whose low nibbles are sub-block 2j and
// high nibbles 2j + 1, each d * sc * q - dmin * m.
AVX2 float rowQ4_K(const uint8_t *b, int64_t nb, const float *x,
                   const float *xs) {
  __m256 acc = _mm256_setzero_ps();
  float off = 0.0f;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i, b += 144) {
    prefetchAhead(b, 144);
    const float d = half(b), dmin = half(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int j = 0; j < 4; ++j, q += 32, x += 64, xs += 2) {
      uint8_t sc1, m1, sc2, m2;
      scaleMinK4(2 * j, scales, sc1, m1);
      scaleMinK4(2 * j + 1, scales, sc2, m2);
      const __m256i v =
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc1),
                            dot32(_mm256_and_si256(v, m4), x), acc);
      acc = _mm256_fmadd_ps(
          _mm256_set1_ps(d * sc2),
          dot32(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), x + 32), acc);
      off -= dmin * m1 * xs[0] + dmin * m2 * xs[1];
    }
  }
  return hsum(acc) + off;
}

// Q6_K: per 128 elements, four runs of 32 (l, l + 32, l + 64, l + 96)
// whose 6-bit quants (minus 32) take their low 4 bits from ql and their
// high 2 from qh, each run scaled per 16 elements by d * sc.
AVX2 float rowQ6_K(const uint8_t *b, int64_t nb, const float *x,
                   const float *) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03),
                bias = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < nb; ++i, b += 210) {
    prefetchAhead(b, 210);
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
    const float d = half(b + 208);
    for (int n = 0; n < 2; ++n, ql += 64, qh += 32, sc += 8, x += 128) {
      const __m256i lo =
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql));
      const __m256i lo2 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 32));
      const __m256i h =
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qh));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(lo, m4),
                          _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)),
          _mm256_or_si256(
              _mm256_and_si256(lo2, m4),
              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2),
                                4)),
          _mm256_or_si256(
              _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4),
              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2),
                                4)),
          _mm256_or_si256(
              _mm256_and_si256(_mm256_srli_epi16(lo2, 4), m4),
              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2),
                                4))};
      for (int r = 0; r < 4; ++r) {
        const __m256i qr = _mm256_sub_epi8(q[r], bias);
        const float *xr = x + 32 * r;
        acc = _mm256_fmadd_ps(
            _mm256_set1_ps(d * sc[2 * r]),
            dot16(_mm256_castsi256_si128(qr), xr, _mm256_setzero_ps()), acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * r + 1]),
                              dot16(_mm256_extracti128_si256(qr, 1), xr + 16,
                                    _mm256_setzero_ps()),
                              acc);
      }
    }
  }
  return hsum(acc);
}

#undef AVX2

using RowKernel = float (*)(const uint8_t *, int64_t, const float *,
                            const float *);

RowKernel avx2Kernel(GGMLType type) {
  static const bool avx2 = __builtin_cpu_supports("avx2") &&
                           __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c");
  if (!avx2)
    return nullptr;
  switch (type) {
  case GGMLType::Q4_0:
    return rowOf32<Q4_0>;
  case GGMLType::Q4_1:
    return rowOf32<Q4_1>;
  case GGMLType::Q5_0:
    return rowOf32<Q5_0>;
  case GGMLType::Q8_0:
    return rowOf32<Q8_0>;
  case GGMLType::Q4_K:
    return rowQ4_K;
  case GGMLType::Q6_K:
    return rowQ6_K;
  default:
    return nullptr;
  }
}
#endif

} // namespace

bool dotRowsSupported(GGMLType type) {
  const GGMLTypeTraits *t = ggmlTypeTraits(static_cast<uint32_t>(type));
  return t && t->dequantizable;
}

bool dotRowsFast(GGMLType type) {
#ifdef CONDENSATE_QUANTDOT_AVX2
  return avx2Kernel(type) != nullptr;
#else
  (void)type;
  return false;
#endif
}

void blockSums(const float *x, int64_t n, float *sums) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    float s = 0.0f;
    for (int64_t e = 0; e < kQK; ++e)
      s += x[i * kQK + e];
    sums[i] = s;
  }
}

void dotRows(GGMLType type, const uint8_t *src, size_t rowBytes, int64_t rows,
             int64_t cols, const float *x, const float *xSums, float *out) {
#ifdef CONDENSATE_QUANTDOT_AVX2
  if (RowKernel k = avx2Kernel(type)) {
    const int64_t blocks =
        cols / ggmlTypeTraits(static_cast<uint32_t>(type))->blockSize;
    for (int64_t r = 0; r < rows; ++r)
      out[r] = k(src + size_t(r) * rowBytes, blocks, x, xSums);
    return;
  }
#endif
  (void)xSums;
  for (int64_t r = 0; r < rows; ++r)
    out[r] = dotDecoded(type, src + size_t(r) * rowBytes, rowBytes, cols, x);
}

} // namespace condensate::model
