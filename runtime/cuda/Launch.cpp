//===- Launch.cpp - Kernel launches and their arguments -------------------===//
//
// Implements launch() (the configuration validated against the stream's
// device before cuLaunchKernel), the thread's last launch error, and
// KernelArgs, the owned parameter block cuLaunchKernel reads.
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

#include <cassert>
#include <cstring>

namespace condensate {
namespace cuda {

using namespace abi;
using detail::LoadedDriver;

namespace {

std::string dimString(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

/// Per-thread record of the last failed launch(); see takeLastLaunchError().
thread_local Status lastLaunchError;

/// launch() without recording; allocates only on failure.
Status launchImpl(const Function &function, Dim3 grid, Dim3 block,
                  unsigned sharedBytes, const Stream &stream,
                  void **kernelParams, LaunchOptions options) {
  if (!function.valid())
    return Status::error("launch: empty function");
  auto what = [&] { return "launch of kernel '" + function.name() + "'"; };
  if (!stream.valid())
    return Status::error(what() + ": empty stream");
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status().withContext(what());
  const LoadedDriver &d = **driver;
  Status valid = validateLaunch(grid, block, sharedBytes,
                                d.device(stream.device()).limits);
  if (!valid.ok())
    return valid.withContext(what());
  const char *call = "cuLaunchKernel";
  CUresult r;
  if (options.programmatic && d.api().cuLaunchKernelEx) {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid.x;
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block.x;
    config.blockDimY = block.y;
    config.blockDimZ = block.z;
    config.sharedMemBytes = sharedBytes;
    config.hStream = stream.raw();
    config.attrs = &attr;
    config.numAttrs = 1;
    call = "cuLaunchKernelEx";
    r = d.api().cuLaunchKernelEx(&config, function.raw(), kernelParams,
                                 nullptr);
  } else {
    r = d.api().cuLaunchKernel(function.raw(), grid.x, grid.y, grid.z, block.x,
                               block.y, block.z, sharedBytes, stream.raw(),
                               kernelParams, nullptr);
  }
  if (r == CUDA_SUCCESS)
    return Status::success();
  return d.check(r, call,
                 "kernel '" + function.name() + "', grid " + dimString(grid) +
                     ", block " + dimString(block) + ", " +
                     std::to_string(sharedBytes) + " bytes dynamic shared");
}

} // namespace

Status validateLaunch(Dim3 grid, Dim3 block, unsigned sharedBytes,
                      const LaunchLimits &limits) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    return Status::error("grid " + dimString(grid) + " has a zero extent");
  if (block.x == 0 || block.y == 0 || block.z == 0)
    return Status::error("block " + dimString(block) + " has a zero extent");
  if (grid.x > limits.maxGrid.x || grid.y > limits.maxGrid.y ||
      grid.z > limits.maxGrid.z)
    return Status::error("grid " + dimString(grid) + " exceeds the maximum " +
                         dimString(limits.maxGrid));
  if (block.x > limits.maxBlock.x || block.y > limits.maxBlock.y ||
      block.z > limits.maxBlock.z)
    return Status::error("block " + dimString(block) + " exceeds the maximum " +
                         dimString(limits.maxBlock));
  unsigned long long threads =
      static_cast<unsigned long long>(block.x) * block.y * block.z;
  if (threads > limits.maxThreadsPerBlock)
    return Status::error("block " + dimString(block) + " has " +
                         std::to_string(threads) + " threads, more than " +
                         std::to_string(limits.maxThreadsPerBlock));
  if (sharedBytes > limits.maxSharedBytesOptin)
    return Status::error("dynamic shared memory of " +
                         std::to_string(sharedBytes) +
                         " bytes exceeds the device's opt-in maximum of " +
                         std::to_string(limits.maxSharedBytesOptin));
  return Status::success();
}

Status launch(const Function &function, Dim3 grid, Dim3 block,
              unsigned sharedBytes, const Stream &stream, void **kernelParams,
              LaunchOptions options) {
  Status status = launchImpl(function, grid, block, sharedBytes, stream,
                             kernelParams, options);
  if (!status.ok())
    lastLaunchError = status;
  return status;
}

Status takeLastLaunchError() {
  Status status = std::move(lastLaunchError);
  lastLaunchError = Status::success();
  return status;
}

//===----------------------------------------------------------------------===//
// KernelArgs
//===----------------------------------------------------------------------===//

void KernelArgs::append(const void *bytes, std::size_t size,
                        std::size_t align) {
  std::size_t offset = (used_ + align - 1) / align * align;
  std::size_t end = offset + size;
  std::size_t chunks = (end + kMaxAlign - 1) / kMaxAlign;
  if (chunks > storage_.size())
    storage_.resize(chunks);
  std::memcpy(reinterpret_cast<unsigned char *>(storage_.data()) + offset,
              bytes, size);
  used_ = end;
  offsets_.push_back(offset);
}

void **KernelArgs::data() {
  // Rebuilt on each call: storage_ may have moved since the last one.
  pointers_.resize(offsets_.size());
  unsigned char *base = reinterpret_cast<unsigned char *>(storage_.data());
  for (std::size_t i = 0; i < offsets_.size(); ++i)
    pointers_[i] = base + offsets_[i];
  return pointers_.empty() ? nullptr : pointers_.data();
}

const void *KernelArgs::argument(std::size_t i) const {
  assert(i < offsets_.size() && "argument index out of range");
  return reinterpret_cast<const unsigned char *>(storage_.data()) + offsets_[i];
}

} // namespace cuda
} // namespace condensate
