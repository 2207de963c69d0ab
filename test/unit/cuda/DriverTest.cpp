//===- DriverTest.cpp - Tests of the CUDA driver layer and cuBLAS ---------===//
//
// GPU tests skip, with the reason, on machines without a driver or device;
// the Host* tests and the no-driver test run everywhere.
//
//===----------------------------------------------------------------------===//
#include "condensate/Cuda/Blas.h"
#include "condensate/Cuda/Driver.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace condensate;
using namespace condensate::cuda;

namespace {

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

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

// Hand-written test kernels (PTX ISA 8.0, sm_80+): a reference for the
// driver layer, not production code. Checked with ptxas for sm_80 and sm_90.
const char *const kTestPtx = R"PTX(
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
constexpr std::uint32_t kPoison = 0x7FC0DEADu;

std::vector<float> randomFloats(std::size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

std::uint32_t bitsOf(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// IEEE binary16 and bfloat16 conversions, round to nearest even.
std::uint16_t floatToHalf(float f) {
  std::uint32_t x = bitsOf(f);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t f32exp = (x >> 23) & 0xFFu;
  std::uint32_t mant = x & 0x7FFFFFu;
  if (f32exp == 0xFFu)
    return static_cast<std::uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));
  int exp = static_cast<int>(f32exp) - 127 + 15;
  if (exp >= 31)
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (exp <= 0) {
    if (exp < -10)
      return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    unsigned shift = static_cast<unsigned>(14 - exp);
    std::uint32_t h = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1u);
    std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1u)))
      ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  std::uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is the correct rounding
  return static_cast<std::uint16_t>(sign | h);
}

float halfToFloat(std::uint16_t h) {
  int exp = (h >> 10) & 0x1F;
  std::uint32_t mant = h & 0x3FFu;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<float>::quiet_NaN()
             : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  return (h & 0x8000u) ? -v : v;
}

std::uint16_t floatToBf16(float f) {
  std::uint32_t u = bitsOf(f);
  u += 0x7FFFu + ((u >> 16) & 1u); // inputs here are finite
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16ToFloat(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

//===----------------------------------------------------------------------===//
// Tests that need no GPU
//===----------------------------------------------------------------------===//

TEST(HostCudaTest, MissingDriverIsReportedCleanly) {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library) {
    dlclose(library);
    GTEST_SKIP() << "libcuda.so.1 is present on this machine";
  }
  EXPECT_FALSE(Driver::available());
  Result<const Driver *> driver = Driver::get();
  ASSERT_FALSE(driver.ok());
  EXPECT_TRUE(contains(driver.message(), "libcuda.so.1")) << driver.message();

  // Everything that needs the driver fails with the same reason.
  Result<Context> context = Context::primary(0);
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(contains(context.message(), "libcuda.so.1"));
  EXPECT_FALSE(Stream::create().ok());
  EXPECT_FALSE(DeviceBuffer::allocate(16).ok());
  EXPECT_FALSE(Module::loadPtx(kTestPtx).ok());
  EXPECT_FALSE(Event::create().ok());
}

TEST(HostCudaTest, DriverLoadsOnceAcrossThreads) {
  // Concurrent first calls all see one outcome (the cache is thread-safe).
  std::vector<Result<const Driver *>> seen(8, Status::error("not run"));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&seen, i] { seen[i] = Driver::get(); });
  for (std::thread &thread : threads)
    thread.join();
  for (const Result<const Driver *> &outcome : seen) {
    ASSERT_EQ(outcome.ok(), seen[0].ok());
    if (outcome.ok())
      EXPECT_EQ(*outcome, *seen[0]);
    else
      EXPECT_EQ(outcome.message(), seen[0].message());
  }
  EXPECT_EQ(Driver::available(), seen[0].ok());
}

TEST(HostCudaTest, ValidateLaunch) {
  LaunchLimits limits; // sm_70+ defaults
  EXPECT_TRUE(validateLaunch(Dim3(1), Dim3(1), 0, limits).ok());
  EXPECT_TRUE(validateLaunch(Dim3(2147483647u, 65535u, 65535u),
                             Dim3(32, 32, 1), 48 * 1024, limits)
                  .ok());

  Status zeroGrid = validateLaunch(Dim3(0), Dim3(128), 0, limits);
  ASSERT_FALSE(zeroGrid.ok());
  EXPECT_TRUE(contains(zeroGrid.message(), "grid (0, 1, 1)"))
      << zeroGrid.message();
  EXPECT_FALSE(validateLaunch(Dim3(4, 0, 1), Dim3(128), 0, limits).ok());
  EXPECT_FALSE(validateLaunch(Dim3(4), Dim3(128, 1, 0), 0, limits).ok());

  Status tooMany = validateLaunch(Dim3(1), Dim3(32, 32, 2), 0, limits);
  ASSERT_FALSE(tooMany.ok());
  EXPECT_TRUE(contains(tooMany.message(), "2048 threads"))
      << tooMany.message();
  EXPECT_FALSE(validateLaunch(Dim3(1), Dim3(1, 1, 65), 0, limits).ok());
  EXPECT_FALSE(validateLaunch(Dim3(1, 65536, 1), Dim3(1), 0, limits).ok());
  Status shared = validateLaunch(Dim3(1), Dim3(1), 48 * 1024 + 1, limits);
  ASSERT_FALSE(shared.ok());
  EXPECT_TRUE(contains(shared.message(), "shared memory")) << shared.message();
}

TEST(HostCudaTest, KernelArgsLayout) {
  struct alignas(16) Pair {
    double a, b;
  };
  KernelArgs args;
  EXPECT_EQ(args.data(), nullptr);
  args.f32(1.5f)
      .ptr(DevicePtr(0x1234567890ull))
      .i32(-7)
      .u32(7u)
      .i64(-1234567890123ll)
      .u64(42u)
      .f64(0.25)
      .value(Pair{1.0, 2.0});
  ASSERT_EQ(args.size(), 8u);
  void **params = args.data();
  ASSERT_NE(params, nullptr);

  float f;
  std::memcpy(&f, params[0], sizeof(f));
  EXPECT_EQ(f, 1.5f);
  EXPECT_EQ(*static_cast<const DevicePtr *>(params[1]), 0x1234567890ull);
  EXPECT_EQ(*static_cast<const std::int32_t *>(params[2]), -7);
  EXPECT_EQ(*static_cast<const std::uint32_t *>(params[3]), 7u);
  EXPECT_EQ(*static_cast<const std::int64_t *>(params[4]), -1234567890123ll);
  EXPECT_EQ(*static_cast<const std::uint64_t *>(params[5]), 42u);
  EXPECT_EQ(*static_cast<const double *>(params[6]), 0.25);
  const Pair *pair = static_cast<const Pair *>(params[7]);
  EXPECT_EQ(pair->a, 1.0);
  EXPECT_EQ(pair->b, 2.0);

  // Natural alignment of every argument.
  const std::size_t aligns[] = {4, 8, 4, 4, 8, 8, 8, 16};
  for (std::size_t i = 0; i < args.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(params[i]) % aligns[i], 0u)
        << "argument " << i;
    EXPECT_EQ(params[i], args.argument(i));
  }

  // Appending after data() and moving keep values intact.
  args.i32(99);
  KernelArgs moved = std::move(args);
  void **again = moved.data();
  EXPECT_EQ(*static_cast<const std::int32_t *>(again[8]), 99);
  EXPECT_EQ(*static_cast<const DevicePtr *>(again[1]), 0x1234567890ull);
}

TEST(HostCudaTest, EmptyHandlesFailWithoutTheDriver) {
  Stream stream;
  Status sync = stream.synchronize();
  ASSERT_FALSE(sync.ok());
  EXPECT_TRUE(contains(sync.message(), "empty stream")) << sync.message();

  Status launched = launch(Function(), Dim3(1), Dim3(1), 0, stream, nullptr);
  ASSERT_FALSE(launched.ok());
  EXPECT_TRUE(contains(launched.message(), "empty function"));
  EXPECT_EQ(takeLastLaunchError().message(), launched.message());
  EXPECT_TRUE(takeLastLaunchError().ok());

  DeviceBuffer empty;
  EXPECT_TRUE(empty.copyFromHost(nullptr, 0).ok());
  float value = 0.0f;
  Status range = empty.copyFromHost(&value, sizeof(value));
  ASSERT_FALSE(range.ok());
  EXPECT_TRUE(contains(range.message(), "exceed")) << range.message();

  EXPECT_FALSE(GraphExec().launch(stream).ok());
  EXPECT_FALSE(Graph().instantiate().ok());
  EXPECT_FALSE(StreamCapture::begin(stream).ok());
  EXPECT_FALSE(Module().getFunction("vec_add").ok());
  EXPECT_FALSE(Blas().gemm(1, 1, 1, ElementType::F32, 1, 1, 1).ok());
}

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
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80u);
  EXPECT_EQ(bf16ToFloat(floatToBf16(-3.0f)), -3.0f);
}

//===----------------------------------------------------------------------===//
// GPU tests
//===----------------------------------------------------------------------===//

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

TEST_F(CudaTest, DeviceProperties) {
  const Driver &driver = **Driver::get();
  EXPECT_TRUE(Driver::available());
  ASSERT_GE(driver.deviceCount(), 1);
  EXPECT_GE(driver.driverVersion(), 12000);
  EXPECT_FALSE(driver.deviceProperties(driver.deviceCount()).ok());
  for (int i = 0; i < driver.deviceCount(); ++i) {
    Result<DeviceProperties> props = driver.deviceProperties(i);
    ASSERT_OK(props);
    std::printf("device %d: %s, sm_%d, %d SMs, %zu MiB, L2 %d KiB, shared "
                "optin %d KiB, driver %d\n",
                i, props->name.c_str(), props->computeCapability(),
                props->multiprocessorCount, props->totalMemoryBytes >> 20,
                props->l2CacheBytes >> 10,
                props->maxSharedBytesPerBlockOptin >> 10,
                driver.driverVersion());
    EXPECT_EQ(props->ordinal, i);
    EXPECT_FALSE(props->name.empty());
    EXPECT_GE(props->computeMajor, 7);
    EXPECT_GT(props->multiprocessorCount, 0);
    EXPECT_EQ(props->warpSize, 32);
    EXPECT_EQ(props->maxSharedBytesPerBlock, 48 * 1024);
    EXPECT_GE(props->maxSharedBytesPerBlockOptin, 48 * 1024);
    EXPECT_GE(props->maxSharedBytesPerMultiprocessor,
              props->maxSharedBytesPerBlockOptin);
    EXPECT_GT(props->l2CacheBytes, 0);
    EXPECT_GT(props->totalMemoryBytes, std::size_t(1) << 30);
    EXPECT_EQ(props->limits.maxThreadsPerBlock, 1024u);
    EXPECT_EQ(props->limits.maxBlock.z, 64u);
    EXPECT_EQ(props->limits.maxGrid.x, 2147483647u);
  }
  EXPECT_EQ(context_.device(), 0);
  EXPECT_EQ(stream_.device(), 0);
  Result<std::pair<std::size_t, std::size_t>> memory = context_.memoryInfo();
  ASSERT_OK(memory);
  EXPECT_LE(memory->first, memory->second);
  EXPECT_EQ(memory->second, driver.device(0).totalMemoryBytes);
}

TEST_F(CudaTest, VectorAddMatchesHost) {
  loadTestModule();
  if (HasFatalFailure() || IsSkipped())
    return;
  Result<Function> vecAdd = module_.getFunction("vec_add");
  ASSERT_OK(vecAdd);
  EXPECT_EQ(vecAdd->name(), "vec_add");
  Result<int> registers = vecAdd->attribute(cuda::abi::CU_FUNC_ATTRIBUTE_NUM_REGS);
  ASSERT_OK(registers);
  EXPECT_GT(*registers, 0);

  const int n = 100003; // not a multiple of the block size
  std::mt19937 rng(1234);
  std::vector<float> a = randomFloats(n, rng), b = randomFloats(n, rng);
  Result<DeviceBuffer> da = upload(a), db = upload(b);
  ASSERT_OK(da);
  ASSERT_OK(db);
  Result<DeviceBuffer> dc = DeviceBuffer::allocate(n * sizeof(float) + 64);
  ASSERT_OK(dc);
  ASSERT_OK(dc->memsetD32Async(kPoison, dc->size() / 4, stream_));

  KernelArgs args;
  args.ptr(*da).ptr(*db).ptr(*dc).i32(n);
  const unsigned block = 256;
  ASSERT_OK(launch(*vecAdd, Dim3((n + block - 1) / block), Dim3(block), 0,
                   stream_, args.data()));
  ASSERT_OK(takeLastLaunchError());
  std::vector<float> c(n + 16);
  ASSERT_OK(dc->copyToHostAsync(c.data(), dc->size(), stream_));
  ASSERT_OK(stream_.synchronize());
  Result<bool> done = stream_.query();
  ASSERT_OK(done);
  EXPECT_TRUE(*done);

  int mismatches = 0;
  for (int i = 0; i < n; ++i)
    if (bitsOf(c[i]) != bitsOf(a[i] + b[i]) && ++mismatches <= 5)
      ADD_FAILURE() << "c[" << i << "] = " << c[i] << ", expected "
                    << a[i] + b[i];
  EXPECT_EQ(mismatches, 0);
  // The tail past n keeps its poison: the kernel respects its bound.
  for (int i = n; i < n + 16; ++i)
    EXPECT_EQ(bitsOf(c[i]), kPoison) << "c[" << i << "] was overwritten";
}

TEST_F(CudaTest, DynamicSharedMemoryAboveDefaultLimit) {
  loadTestModule();
  if (HasFatalFailure() || IsSkipped())
    return;
  Result<Function> reverse = module_.getFunction("reverse_through_smem");
  ASSERT_OK(reverse);
  const DeviceProperties &props = context_.properties();
  const unsigned shared =
      static_cast<unsigned>(props.maxSharedBytesPerBlockOptin) & ~15u;
  ASSERT_GT(shared, 48u * 1024);
  const unsigned words = shared / 4;
  Result<DeviceBuffer> out = DeviceBuffer::allocate(words * 4);
  ASSERT_OK(out);
  ASSERT_OK(out->memsetD32Async(kPoison, words, stream_));
  KernelArgs args;
  args.ptr(*out).u32(words);

  // Without opting in, the driver refuses more than 48 KiB.
  Status refused =
      launch(*reverse, Dim3(1), Dim3(256), shared, stream_, args.data());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.message(), "cuLaunchKernel failed: CUDA_ERROR_"))
      << refused.message();
  EXPECT_TRUE(contains(refused.message(), "reverse_through_smem"));
  EXPECT_FALSE(takeLastLaunchError().ok());

  ASSERT_OK(reverse->setMaxDynamicSharedMemory(static_cast<int>(shared)));
  ASSERT_OK(launch(*reverse, Dim3(1), Dim3(256), shared, stream_, args.data()));
  std::vector<std::uint32_t> host(words);
  ASSERT_OK(out->copyToHostAsync(host.data(), words * 4, stream_));
  ASSERT_OK(stream_.synchronize());
  for (unsigned i = 0; i < words; ++i)
    ASSERT_EQ(host[i], 3u * (words - 1 - i) + 1) << "word " << i;
}

TEST_F(CudaTest, ErrorPaths) {
  loadTestModule();
  if (HasFatalFailure() || IsSkipped())
    return;

  Result<Module> bad = Module::loadPtx(".version 8.0\n.target sm_80\n"
                                       ".address_size 64\n"
                                       ".visible .entry broken() {\n"
                                       "  bogus.instruction %r1;\n}\n");
  ASSERT_FALSE(bad.ok());
  std::printf("invalid PTX: %s\n", bad.message().c_str());
  EXPECT_TRUE(contains(bad.message(), "cuModuleLoadDataEx failed: CUDA_ERROR_"))
      << bad.message();
  EXPECT_TRUE(contains(bad.message(), "JIT log:")) << bad.message();
  EXPECT_FALSE(contains(bad.message(), "\n"));

  // Neither ELF nor fatbin, so the driver reads it as (invalid) PTX text;
  // a malformed ELF header could make it read past the buffer.
  const char garbage[] = "this is not a module";
  Result<Module> image = Module::loadImage(garbage, sizeof(garbage));
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(contains(image.message(), "CUDA_ERROR_")) << image.message();

  Result<Function> missing = module_.getFunction("no_such_kernel");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.message(), "cuModuleGetFunction failed: "
                                          "CUDA_ERROR_NOT_FOUND"))
      << missing.message();
  EXPECT_TRUE(contains(missing.message(), "no_such_kernel"));

  Result<Function> vecAdd = module_.getFunction("vec_add");
  ASSERT_OK(vecAdd);
  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(64);
  ASSERT_OK(buffer);
  KernelArgs args;
  args.ptr(*buffer).ptr(*buffer).ptr(*buffer).i32(16);
  Status zero =
      launch(*vecAdd, Dim3(0, 1, 1), Dim3(16), 0, stream_, args.data());
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(contains(zero.message(), "zero extent")) << zero.message();
  EXPECT_TRUE(contains(zero.message(), "vec_add")) << zero.message();
  EXPECT_FALSE(contains(zero.message(), "cuLaunchKernel")) << zero.message();
  Status last = takeLastLaunchError();
  EXPECT_EQ(last.message(), zero.message());
  EXPECT_TRUE(takeLastLaunchError().ok());
  EXPECT_FALSE(
      launch(*vecAdd, Dim3(1), Dim3(2048), 0, stream_, args.data()).ok());
  (void)takeLastLaunchError();

  float host[32];
  EXPECT_FALSE(buffer->copyToHost(host, sizeof(host), 48).ok());
  EXPECT_FALSE(buffer->memsetD32Async(0, 1, stream_, 2).ok());
  ASSERT_OK(stream_.synchronize()); // nothing above poisoned the context
}

TEST_F(CudaTest, GraphCaptureReplayAndUpdate) {
  loadTestModule();
  if (HasFatalFailure() || IsSkipped())
    return;
  Result<Function> axpy = module_.getFunction("axpy");
  ASSERT_OK(axpy);
  const std::uint64_t n = 4099;
  std::mt19937 rng(99);
  std::vector<float> x = randomFloats(n, rng), y0 = randomFloats(n, rng);
  Result<DeviceBuffer> dx = upload(x), dy = upload(y0);
  ASSERT_OK(dx);
  ASSERT_OK(dy);
  const unsigned block = 128;
  const Dim3 grid(static_cast<unsigned>((n + block - 1) / block));

  // Two launches, y += a1 * x then y += a2 * x, captured into one graph.
  auto capture = [&](float a1, float a2) -> Result<Graph> {
    Result<StreamCapture> scope = StreamCapture::begin(stream_);
    if (!scope)
      return scope.status();
    Result<bool> capturing = stream_.isCapturing();
    if (!capturing || !*capturing)
      return Status::error("stream is not capturing");
    for (float alpha : {a1, a2}) {
      KernelArgs args; // copied into the graph node at capture
      args.f32(alpha).ptr(*dx).ptr(*dy).u64(n);
      CONDENSATE_RETURN_IF_ERROR(
          launch(*axpy, grid, Dim3(block), 0, stream_, args.data()));
    }
    return scope->end();
  };
  auto expected = [&](std::vector<float> y, float a1, float a2, int times) {
    for (int t = 0; t < times; ++t)
      for (std::uint64_t i = 0; i < n; ++i) {
        y[i] = std::fma(a1, x[i], y[i]);
        y[i] = std::fma(a2, x[i], y[i]);
      }
    return y;
  };
  auto check = [&](const std::vector<float> &want) {
    std::vector<float> got(n);
    Status s = dy->download(got);
    if (!s.ok())
      return s;
    for (std::uint64_t i = 0; i < n; ++i)
      if (bitsOf(got[i]) != bitsOf(want[i]))
        return Status::error("y[" + std::to_string(i) + "] = " +
                             std::to_string(got[i]) + ", expected " +
                             std::to_string(want[i]));
    return Status::success();
  };

  Result<Graph> graph = capture(1.0f, 0.5f);
  ASSERT_OK(graph);
  Result<bool> capturing = stream_.isCapturing();
  ASSERT_OK(capturing);
  EXPECT_FALSE(*capturing);
  // Capture recorded the launches without running them.
  ASSERT_OK(check(y0));

  Result<GraphExec> exec = graph->instantiate();
  ASSERT_OK(exec);
  ASSERT_OK(exec->upload(stream_));
  Result<Event> start = Event::create(), stop = Event::create();
  ASSERT_OK(start);
  ASSERT_OK(stop);
  ASSERT_OK(start->record(stream_));
  for (int replay = 0; replay < 3; ++replay)
    ASSERT_OK(exec->launch(stream_));
  ASSERT_OK(stop->record(stream_));
  ASSERT_OK(stop->synchronize());
  Result<float> ms = Event::elapsedMs(*start, *stop);
  ASSERT_OK(ms);
  EXPECT_GE(*ms, 0.0f);
  std::vector<float> y3 = expected(y0, 1.0f, 0.5f, 3);
  ASSERT_OK(check(y3));

  // Same topology, new scalars: update the executable graph in place.
  Result<Graph> other = capture(2.0f, -0.25f);
  ASSERT_OK(other);
  ASSERT_OK(exec->update(*other));
  ASSERT_OK(exec->launch(stream_));
  ASSERT_OK(stream_.synchronize());
  ASSERT_OK(check(expected(y3, 2.0f, -0.25f, 1)));

  // An abandoned capture scope leaves the stream usable.
  {
    Result<StreamCapture> scope = StreamCapture::begin(stream_);
    ASSERT_OK(scope);
  }
  Result<bool> after = stream_.isCapturing();
  ASSERT_OK(after);
  EXPECT_FALSE(*after);
  ASSERT_OK(stream_.synchronize());
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
                                         : floatToBf16(host[i]);
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
