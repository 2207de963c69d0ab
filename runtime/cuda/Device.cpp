//===- Device.cpp - Devices and their primary contexts --------------------===//
//
// Reads every device's properties once, when the driver loads, and
// implements Context: a retained primary context made current on a thread.
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

#include <cassert>

namespace condensate {
namespace cuda {

using namespace abi;
using detail::LoadedDriver;

namespace {
Status noSuchDevice(int ordinal, int count) {
  return Status::error("no CUDA device " + std::to_string(ordinal) + " (" +
                       std::to_string(count) + " visible)");
}
} // namespace

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

Status LoadedDriver::queryDevices() {
  int count = 0;
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(*this, cuDeviceGetCount, &count));
  if (count <= 0)
    return Status::error("no CUDA device: cuDeviceGetCount returned 0");

  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice dev = 0;
    CONDENSATE_RETURN_IF_ERROR(
        CONDENSATE_CU(*this, cuDeviceGet, &dev, ordinal));
    DeviceProperties props;
    props.ordinal = ordinal;
    char name[256] = {};
    CONDENSATE_RETURN_IF_ERROR(
        CONDENSATE_CU(*this, cuDeviceGetName, name, sizeof(name) - 1, dev));
    props.name = name;
    CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(*this, cuDeviceTotalMem_v2,
                                             &props.totalMemoryBytes, dev));

    Status status;
    auto attr = [&](CUdevice_attribute attribute) {
      int value = 0;
      if (status.ok())
        status = check(api_.cuDeviceGetAttribute(&value, attribute, dev),
                       "cuDeviceGetAttribute",
                       "attribute " + std::to_string(attribute));
      return value;
    };
    auto uattr = [&](CUdevice_attribute attribute) {
      return static_cast<unsigned>(attr(attribute));
    };
    props.computeMajor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    props.computeMinor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    props.multiprocessorCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    props.warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    props.maxSharedBytesPerBlock =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    props.maxSharedBytesPerBlockOptin =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    props.maxSharedBytesPerMultiprocessor =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    props.maxRegistersPerBlock =
        attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    props.maxThreadsPerMultiprocessor =
        attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    props.l2CacheBytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    LaunchLimits &limits = props.limits;
    limits.maxGrid = Dim3(uattr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                          uattr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                          uattr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z));
    limits.maxBlock = Dim3(uattr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                           uattr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                           uattr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z));
    limits.maxThreadsPerBlock =
        uattr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    limits.maxSharedBytesOptin =
        static_cast<unsigned>(props.maxSharedBytesPerBlockOptin);
    CONDENSATE_RETURN_IF_ERROR(status);

    devices_.push_back(std::move(props));
    handles_.push_back(dev);
  }
  return Status::success();
}

CUdevice LoadedDriver::handle(int ordinal) const {
  assert(ordinal >= 0 && ordinal < deviceCount() && "bad device ordinal");
  return handles_[static_cast<std::size_t>(ordinal)];
}

int LoadedDriver::ordinalOf(CUdevice dev) const {
  for (std::size_t i = 0; i < handles_.size(); ++i)
    if (handles_[i] == dev)
      return static_cast<int>(i);
  return -1;
}

Result<DeviceProperties> Driver::deviceProperties(int ordinal) const {
  if (ordinal < 0 || ordinal >= deviceCount())
    return noSuchDevice(ordinal, deviceCount());
  return devices_[static_cast<std::size_t>(ordinal)];
}

const DeviceProperties &Driver::device(int ordinal) const {
  assert(ordinal >= 0 && ordinal < deviceCount() && "bad device ordinal");
  return devices_[static_cast<std::size_t>(ordinal)];
}

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

void detail::releasePrimaryContext(PrimaryContext raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded())
    (void)d->api().cuDevicePrimaryCtxRelease_v2(d->handle(raw.device));
}

Result<Context> Context::primary(int ordinal) {
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status();
  const LoadedDriver &d = **driver;
  if (ordinal < 0 || ordinal >= d.deviceCount())
    return noSuchDevice(ordinal, d.deviceCount());
  ContextHandle retained = nullptr;
  CONDENSATE_RETURN_IF_ERROR(
      CONDENSATE_CU(d, cuDevicePrimaryCtxRetain, &retained, d.handle(ordinal)));
  Context context;
  // From here on the destructor releases the retained context.
  context.handle_.reset({retained, ordinal});
  CONDENSATE_RETURN_IF_ERROR(context.makeCurrent());
  return context;
}

Status Context::makeCurrent() const {
  if (!valid())
    return Status::error("Context::makeCurrent: empty context");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuCtxSetCurrent, raw());
}

Status Context::synchronize() const {
  CONDENSATE_RETURN_IF_ERROR(makeCurrent());
  return CONDENSATE_CU(LoadedDriver::loaded(), cuCtxSynchronize);
}

Result<std::pair<std::size_t, std::size_t>> Context::memoryInfo() const {
  CONDENSATE_RETURN_IF_ERROR(makeCurrent());
  std::size_t freeBytes = 0, totalBytes = 0;
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(
      LoadedDriver::loaded(), cuMemGetInfo_v2, &freeBytes, &totalBytes));
  return std::make_pair(freeBytes, totalBytes);
}

Status Context::setProfiling(bool on) const {
  CONDENSATE_RETURN_IF_ERROR(makeCurrent());
  const LoadedDriver &d = LoadedDriver::loaded();
  if (!d.api().cuProfilerStart || !d.api().cuProfilerStop)
    return Status::error("Context::setProfiling: the driver has no "
                         "cuProfilerStart/cuProfilerStop");
  return on ? CONDENSATE_CU(d, cuProfilerStart)
            : CONDENSATE_CU(d, cuProfilerStop);
}

const DeviceProperties &Context::properties() const {
  return LoadedDriver::loaded().device(device());
}

} // namespace cuda
} // namespace condensate
