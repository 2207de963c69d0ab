//===- CudaTestSupport.h - What the CUDA layer's tests share --------------===//
//
// Assertion and skip macros, the hand-written test kernels, random inputs
// and the CudaTest fixture (a context and a stream on device 0), for
// DriverTest.cpp and BlasTest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_UNIT_CUDA_CUDATESTSUPPORT_H
#define CONDENSATE_TEST_UNIT_CUDA_CUDATESTSUPPORT_H

#include "condensate/Cuda/Driver.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    const auto &assertOkValue = (expr);                                        \
    ASSERT_TRUE(assertOkValue.ok()) << #expr ": " << assertOkValue.message();  \
  } while (0)

/// Skips the current test unless a CUDA driver and device are present.
#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    Result<const Driver *> skipDriver = Driver::get();                         \
    if (!skipDriver) {                                                         \
      if (skipDriver.message().rfind("no CUDA driver:", 0) == 0)               \
        GTEST_SKIP() << "no CUDA driver (libcuda.so.1 not found); "            \
                     << skipDriver.message();                                  \
      GTEST_SKIP() << "no CUDA device; " << skipDriver.message();              \
    }                                                                          \
  } while (0)

namespace condensate {
namespace cuda {
namespace cudatest {

inline bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

// Hand-written test kernels (PTX ISA 8.0, sm_80+): a reference for the
// driver layer, not production code. Checked with ptxas for sm_80 and sm_90.
inline constexpr const char *kTestPtx = R"PTX(
.version 8.0
.target sm_80
.address_size 64

// c[i] = a[i] + b[i] for i < n (n: s32).
.visible .entry vec_add(
    .param .u64 vec_add_a,
    .param .u64 vec_add_b,
    .param .u64 vec_add_c,
    .param .u32 vec_add_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<10>;

    ld.param.u64 %rd1, [vec_add_a];
    ld.param.u64 %rd2, [vec_add_b];
    ld.param.u64 %rd3, [vec_add_c];
    ld.param.u32 %r1, [vec_add_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra VEC_ADD_DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.s32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    ld.global.f32 %f1, [%rd8];
    add.s64 %rd9, %rd5, %rd7;
    ld.global.f32 %f2, [%rd9];
    add.rn.f32 %f3, %f1, %f2;
    add.s64 %rd9, %rd6, %rd7;
    st.global.f32 [%rd9], %f3;
VEC_ADD_DONE:
    ret;
}

// y[i] = fma(alpha, x[i], y[i]) for i < n (n: u64).
.visible .entry axpy(
    .param .f32 axpy_alpha,
    .param .u64 axpy_x,
    .param .u64 axpy_y,
    .param .u64 axpy_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<12>;

    ld.param.f32 %f1, [axpy_alpha];
    ld.param.u64 %rd1, [axpy_x];
    ld.param.u64 %rd2, [axpy_y];
    ld.param.u64 %rd3, [axpy_n];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.s64 %rd6, %rd4, %rd5;
    setp.ge.u64 %p1, %rd6, %rd3;
    @%p1 bra AXPY_DONE;
    cvta.to.global.u64 %rd7, %rd1;
    cvta.to.global.u64 %rd8, %rd2;
    shl.b64 %rd9, %rd6, 2;
    add.s64 %rd10, %rd7, %rd9;
    add.s64 %rd11, %rd8, %rd9;
    ld.global.f32 %f2, [%rd10];
    ld.global.f32 %f3, [%rd11];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd11], %f4;
AXPY_DONE:
    ret;
}

// One block: smem[i] = 3 * i + 1 for i < n words, then
// out[i] = smem[n - 1 - i]; n is the dynamic shared size in words.
.extern .shared .align 16 .b8 reverse_smem[];
.visible .entry reverse_through_smem(
    .param .u64 reverse_out,
    .param .u32 reverse_n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [reverse_out];
    ld.param.u32 %r1, [reverse_n];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, reverse_smem;
    mov.u32 %r5, %r2;
FILL:
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra FILL_DONE;
    mad.lo.u32 %r6, %r5, 3, 1;
    shl.b32 %r7, %r5, 2;
    add.u32 %r8, %r4, %r7;
    st.shared.u32 [%r8], %r6;
    add.u32 %r5, %r5, %r3;
    bra FILL;
FILL_DONE:
    bar.sync 0;
    mov.u32 %r5, %r2;
READ:
    setp.ge.u32 %p2, %r5, %r1;
    @%p2 bra READ_DONE;
    sub.u32 %r9, %r1, %r5;
    sub.u32 %r9, %r9, 1;
    shl.b32 %r7, %r9, 2;
    add.u32 %r8, %r4, %r7;
    ld.shared.u32 %r10, [%r8];
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r10;
    add.u32 %r5, %r5, %r3;
    bra READ;
READ_DONE:
    ret;
}
)PTX";

/// A quiet-NaN bit pattern used to poison outputs before a kernel runs.
inline constexpr std::uint32_t kPoison = 0x7FC0DEADu;

inline std::vector<float> randomFloats(std::size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline std::uint32_t bitsOf(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

/// Retains device 0's primary context and a stream; skips without a GPU.
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    Result<Context> context = Context::primary(0);
    ASSERT_TRUE(context.ok()) << context.message();
    context_ = context.take();
    Result<Stream> stream = Stream::create();
    ASSERT_TRUE(stream.ok()) << stream.message();
    stream_ = stream.take();
  }

  /// The test module; skips on devices older than sm_80.
  void loadTestModule() {
    if (context_.properties().computeMajor < 8)
      GTEST_SKIP() << "test PTX targets sm_80+";
    Result<Module> module = Module::loadPtx(kTestPtx);
    ASSERT_TRUE(module.ok()) << module.message();
    module_ = module.take();
  }

  Result<DeviceBuffer> upload(const std::vector<float> &host) {
    Result<DeviceBuffer> buffer =
        DeviceBuffer::allocate(host.size() * sizeof(float));
    if (buffer)
      if (Status s = buffer->upload(host); !s.ok())
        return s;
    return buffer;
  }

  // Members are destroyed in reverse order: the context last.
  Context context_;
  Stream stream_;
  Module module_;
};

} // namespace cudatest
} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_TEST_UNIT_CUDA_CUDATESTSUPPORT_H
