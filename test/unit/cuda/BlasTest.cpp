//===- BlasTest.cpp - Tests of the cuBLAS wrapper -------------------------===//
//
// Row-major gemms in f32, f16 and bf16 (also inside graph capture) checked
// element by element; skipped, with the reason, without a GPU or cuBLAS.
//
//===----------------------------------------------------------------------===//
#include "../Half.h"
#include "CudaTestSupport.h"

#include "condensate/Cuda/Blas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace condensate;
using namespace condensate::cuda;
using namespace condensate::cuda::cudatest;

namespace {

// IEEE binary16 and bfloat16 conversions, round to nearest even (the
// tests' own, shared with the attention tests).
using condensate::test::bf16ToFloat;
using condensate::test::floatToBF16;
using condensate::test::floatToHalf;
using condensate::test::halfToFloat;

//===----------------------------------------------------------------------===//
// Tests that need no GPU
//===----------------------------------------------------------------------===//

TEST(HostCudaTest, BlasLibraryLoadsOrSaysWhy) {
  Status status = Blas::libraryStatus();
  EXPECT_EQ(status.ok(), Blas::available());
  if (!status.ok())
    EXPECT_TRUE(contains(status.message(), "libcublas")) << status.message();
  else
    std::printf("cuBLAS library loaded\n");
}

TEST(HostCudaTest, HalfConversions) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00u);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000u);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFFu);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00u); // tie: even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02u);
  EXPECT_EQ(halfToFloat(0x3555u), 0.333251953125f);
  EXPECT_EQ(floatToBF16(1.0f), 0x3F80u);
  EXPECT_EQ(bf16ToFloat(floatToBF16(-3.0f)), -3.0f);
}

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

class BlasTest : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (HasFatalFailure() || IsSkipped())
      return;
    if (!Blas::available())
      GTEST_SKIP() << "no cuBLAS: " << Blas::libraryStatus().message();
    Result<Blas> blas = Blas::create(stream_);
    ASSERT_TRUE(blas.ok()) << blas.message();
    blas_ = blas.take();
  }

  /// Device copy of `host` in `type`; `rounded` receives the values the
  /// device sees.
  Result<DeviceBuffer> uploadAs(ElementType type, const std::vector<float> &host,
                                std::vector<float> &rounded) {
    rounded.resize(host.size());
    if (type == ElementType::F32) {
      rounded = host;
      return upload(host);
    }
    std::vector<std::uint16_t> bits(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) {
      bits[i] = type == ElementType::F16 ? floatToHalf(host[i])
                                         : floatToBF16(host[i]);
      rounded[i] = type == ElementType::F16 ? halfToFloat(bits[i])
                                            : bf16ToFloat(bits[i]);
    }
    Result<DeviceBuffer> buffer = DeviceBuffer::allocate(bits.size() * 2);
    if (buffer)
      if (Status s = buffer->upload(bits); !s.ok())
        return s;
    return buffer;
  }

  struct Case {
    int m, n, k;
    int lda = 0, ldb = 0, ldc = 0; // 0: dense
  };

  /// Runs one row-major gemm (optionally captured into a graph) and checks
  /// every element of C = A * B^T. With `exactInputs`, values are k/64 for
  /// small integers k, so every product and sum is exact in f32 and the
  /// result must match bit for bit; otherwise inputs are uniform in [-1, 1]
  /// and |C - ref| <= tolerance * sum_k |A B| against a float64 reference
  /// computed from the unrounded inputs.
  void runGemm(ElementType type, Case c, bool exactInputs, double tolerance,
               bool allowTf32 = false, bool inGraph = false) {
    SCOPED_TRACE(std::string(elementTypeName(type)) + " M=" +
                 std::to_string(c.m) + " N=" + std::to_string(c.n) +
                 " K=" + std::to_string(c.k) +
                 (exactInputs ? " exact" : " random") +
                 (inGraph ? " graph" : ""));
    const int lda = c.lda ? c.lda : c.k, ldb = c.ldb ? c.ldb : c.k,
              ldc = c.ldc ? c.ldc : c.n;
    std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 7 + c.k));
    auto fill = [&](std::size_t count) {
      std::vector<float> v = randomFloats(count, rng);
      if (exactInputs)
        for (float &x : v)
          x = std::round(x * 64.0f) / 64.0f;
      return v;
    };
    std::vector<float> a = fill(std::size_t(c.m) * lda);
    std::vector<float> b = fill(std::size_t(c.n) * ldb);
    std::vector<float> ar, br;
    Result<DeviceBuffer> da = uploadAs(type, a, ar), db = uploadAs(type, b, br);
    ASSERT_OK(da);
    ASSERT_OK(db);
    Result<DeviceBuffer> dc =
        DeviceBuffer::allocate(std::size_t(c.m) * ldc * sizeof(float));
    ASSERT_OK(dc);
    ASSERT_OK(dc->memsetD32Async(kPoison, dc->size() / 4, stream_));

    GemmOptions options;
    options.lda = c.lda;
    options.ldb = c.ldb;
    options.ldc = c.ldc;
    options.allowTf32 = allowTf32;
    if (inGraph) {
      Result<StreamCapture> scope = StreamCapture::begin(stream_);
      ASSERT_OK(scope);
      ASSERT_OK(blas_.gemm(c.m, c.n, c.k, type, da->address(), db->address(),
                           dc->address(), options));
      Result<Graph> graph = scope->end();
      ASSERT_OK(graph);
      Result<GraphExec> exec = graph->instantiate();
      ASSERT_OK(exec);
      ASSERT_OK(exec->launch(stream_));
      ASSERT_OK(exec->launch(stream_)); // beta = 0: replays are idempotent
    } else {
      ASSERT_OK(blas_.gemm(c.m, c.n, c.k, type, da->address(), db->address(),
                           dc->address(), options));
    }
    std::vector<float> got(std::size_t(c.m) * ldc);
    ASSERT_OK(dc->copyToHostAsync(got.data(), dc->size(), stream_));
    ASSERT_OK(stream_.synchronize());

    double worst = 0.0;
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        double ref = 0.0, scale = 0.0;
        for (int k = 0; k < c.k; ++k) {
          const std::vector<float> &av = exactInputs ? ar : a;
          const std::vector<float> &bv = exactInputs ? br : b;
          double p = double(av[std::size_t(i) * lda + k]) *
                     double(bv[std::size_t(j) * ldb + k]);
          ref += p;
          scale += std::fabs(p);
        }
        float value = got[std::size_t(i) * ldc + j];
        ASSERT_FALSE(std::isnan(value)) << "C[" << i << "," << j << "]";
        if (exactInputs) {
          ASSERT_EQ(double(value), ref) << "C[" << i << "," << j << "]";
        } else {
          double err = std::fabs(double(value) - ref) / std::max(scale, 1e-30);
          worst = std::max(worst, err);
          ASSERT_LE(err, tolerance) << "C[" << i << "," << j << "] = " << value
                                    << ", reference " << ref;
        }
      }
    // Padding columns of a strided C are never written.
    for (int i = 0; i < c.m; ++i)
      for (int j = c.n; j < ldc; ++j)
        ASSERT_EQ(bitsOf(got[std::size_t(i) * ldc + j]), kPoison);
    if (!exactInputs)
      std::printf("  %s M=%d N=%d K=%d%s: max error / sum|ab| = %.3g\n",
                  elementTypeName(type), c.m, c.n, c.k,
                  allowTf32 ? " (tf32)" : "", worst);
  }

  Blas blas_;
};

TEST_F(BlasTest, GemmF32) {
  Result<int> version = blas_.version();
  ASSERT_OK(version);
  std::printf("cuBLAS version %d, workspace %zu MiB\n", *version,
              blas_.workspaceBytes() >> 20);
  for (Case c : {Case{1, 7, 33}, Case{37, 129, 300}, Case{5, 3, 17, 21, 19, 8}})
    for (bool exact : {true, false}) {
      runGemm(ElementType::F32, c, exact, 1e-5);
      if (HasFatalFailure())
        return;
    }
  runGemm(ElementType::F32, Case{37, 129, 300}, false, 5e-3,
          /*allowTf32=*/true);
}

TEST_F(BlasTest, GemmF16) {
  for (Case c : {Case{1, 7, 33}, Case{37, 129, 300}, Case{5, 3, 18, 24, 20, 8}})
    for (bool exact : {true, false}) {
      runGemm(ElementType::F16, c, exact, 2e-3);
      if (HasFatalFailure())
        return;
    }
}

TEST_F(BlasTest, GemmBF16) {
  for (Case c : {Case{1, 7, 33}, Case{37, 129, 300}, Case{5, 3, 18, 24, 20, 8}})
    for (bool exact : {true, false}) {
      runGemm(ElementType::BF16, c, exact, 1e-2);
      if (HasFatalFailure())
        return;
    }
}

TEST_F(BlasTest, GemmInsideGraphCapture) {
  runGemm(ElementType::BF16, Case{1, 7, 33}, true, 0.0, false, true);
  if (HasFatalFailure())
    return;
  runGemm(ElementType::F32, Case{37, 129, 300}, false, 1e-5, false, true);
}

TEST_F(BlasTest, StridedBatched) {
  const int batch = 3, m = 5, n = 7, k = 33;
  std::mt19937 rng(7);
  std::vector<float> a = randomFloats(std::size_t(batch) * m * k, rng);
  std::vector<float> b = randomFloats(std::size_t(batch) * n * k, rng);
  for (float &x : a)
    x = std::round(x * 64.0f) / 64.0f;
  for (float &x : b)
    x = std::round(x * 64.0f) / 64.0f;
  std::vector<float> ar, br;
  Result<DeviceBuffer> da = uploadAs(ElementType::BF16, a, ar);
  Result<DeviceBuffer> db = uploadAs(ElementType::BF16, b, br);
  ASSERT_OK(da);
  ASSERT_OK(db);
  Result<DeviceBuffer> dc =
      DeviceBuffer::allocate(std::size_t(batch) * m * n * sizeof(float));
  ASSERT_OK(dc);
  ASSERT_OK(dc->memsetD32Async(kPoison, dc->size() / 4, stream_));
  ASSERT_OK(blas_.gemmStridedBatched(batch, m, n, k, ElementType::BF16,
                                     da->address(), m * k, db->address(),
                                     n * k, dc->address(), m * n));
  std::vector<float> got(std::size_t(batch) * m * n);
  ASSERT_OK(dc->copyToHostAsync(got.data(), dc->size(), stream_));
  ASSERT_OK(stream_.synchronize());
  for (int p = 0; p < batch; ++p)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double ref = 0.0;
        for (int q = 0; q < k; ++q)
          ref += double(ar[(std::size_t(p) * m + i) * k + q]) *
                 double(br[(std::size_t(p) * n + j) * k + q]);
        ASSERT_EQ(double(got[(std::size_t(p) * m + i) * n + j]), ref)
            << "batch " << p << " C[" << i << "," << j << "]";
      }
}

TEST_F(BlasTest, InvalidArgumentsAreRejected) {
  Status negative = blas_.gemm(-1, 7, 33, ElementType::F32, 16, 16, 16);
  ASSERT_FALSE(negative.ok());
  EXPECT_TRUE(contains(negative.message(), "negative")) << negative.message();
  GemmOptions narrow;
  narrow.lda = 4; // < K
  Status lda = blas_.gemm(2, 7, 33, ElementType::F16, 16, 16, 16, narrow);
  ASSERT_FALSE(lda.ok());
  EXPECT_TRUE(contains(lda.message(), "leading dimension")) << lda.message();
  EXPECT_TRUE(blas_.gemm(0, 7, 33, ElementType::F32, 0, 0, 0).ok());
}

} // namespace
