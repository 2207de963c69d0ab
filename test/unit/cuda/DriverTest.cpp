//===- DriverTest.cpp - Tests of the CUDA driver layer --------------------===//
//
// GPU tests skip, with the reason, on machines without a driver or device;
// the Host* tests and the no-driver test run everywhere.
//
//===----------------------------------------------------------------------===//
#include "CudaTestSupport.h"

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
using namespace condensate::cuda::cudatest;

namespace {

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

//===----------------------------------------------------------------------===//
// GPU tests
//===----------------------------------------------------------------------===//


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
  Result<int> registers = vecAdd->attribute(FunctionAttribute::Registers);
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

} // namespace
