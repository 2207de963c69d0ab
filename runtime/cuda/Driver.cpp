//===- Driver.cpp - CUDA driver API, loaded at run time -------------------===//
//
// Implements Driver.h: loads libcuda.so.1 with dlopen, resolves the versioned
// entry points listed in DriverAbi.h and wraps driver handles in RAII types.
//
//===----------------------------------------------------------------------===//
#include "condensate/Cuda/Driver.h"

#include <dlfcn.h>

#include <cassert>
#include <cstring>
#include <limits>
#include <memory>

namespace condensate {
namespace cuda {

using namespace abi;

namespace {

/// Entry points whose versioned name newer drivers export, with the older
/// same-ABI name to fall back to.
struct Fallback {
  const char *name;
  const char *older;
};
constexpr Fallback kFallbacks[] = {
    {"cuEventElapsedTime_v2", "cuEventElapsedTime"},
};

/// Turns a multi-line driver log into one line.
std::string oneLine(const char *text) {
  std::string out;
  for (const char *c = text; *c; ++c) {
    if (*c == '\n' || *c == '\r') {
      if (!out.empty() && out.back() != ' ')
        out += "; ";
    } else {
      out += *c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';'))
    out.pop_back();
  return out;
}

std::string dimString(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

/// The loaded driver's entry points, or null if it is not available. Used by
/// destructors, which cannot report errors.
const DriverApi *loadedApi() {
  Result<const Driver *> driver = Driver::get();
  return driver ? &(*driver)->api() : nullptr;
}

/// Per-thread record of the last failed launch(); see takeLastLaunchError().
thread_local Status lastLaunchError;

} // namespace

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

struct DriverLoader {
  static Result<const Driver *> load() {
    // The Driver is deliberately never freed (see Driver.h).
    std::unique_ptr<Driver> driver(new Driver());

    driver->library_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver->library_) {
      // dlerror() normally reads "libcuda.so.1: cannot open shared object
      // file: ..."; make sure the library's name is there in any case.
      const char *why = dlerror();
      std::string reason = why ? why : "unknown dlopen error";
      if (reason.find("libcuda.so.1") == std::string::npos)
        reason = "dlopen(libcuda.so.1) failed: " + reason;
      return Status::error("no CUDA driver: " + reason);
    }

    DriverApi &api = driver->api_;
    std::string missing;
    auto resolve = [&](const char *name, bool required) -> void * {
      void *symbol = dlsym(driver->library_, name);
      for (const Fallback &fallback : kFallbacks)
        if (!symbol && std::strcmp(fallback.name, name) == 0)
          symbol = dlsym(driver->library_, fallback.older);
      if (!symbol && required)
        missing += missing.empty() ? name : std::string(", ") + name;
      return symbol;
    };
#define CONDENSATE_CUDA_RESOLVE(name, ret, params, required)                   \
  api.name = reinterpret_cast<PFN_##name>(resolve(#name, required));
    CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(CONDENSATE_CUDA_RESOLVE)
#undef CONDENSATE_CUDA_RESOLVE
    if (!missing.empty()) {
      // Keep the library mapped: another component may be using it.
      return Status::error("libcuda.so.1 lacks driver entry points (driver "
                           "older than CUDA 12?): " +
                           missing);
    }

    const Driver &d = *driver;
    CUresult init = api.cuInit(0);
    CONDENSATE_RETURN_IF_ERROR(d.check(
        init, "cuInit",
        init == CUDA_ERROR_STUB_LIBRARY
            ? "the libcuda.so.1 found is the toolkit's stub, not a driver"
            : std::string()));
    CONDENSATE_RETURN_IF_ERROR(
        d.check(api.cuDriverGetVersion(&driver->driverVersion_),
                "cuDriverGetVersion"));
    int count = 0;
    CONDENSATE_RETURN_IF_ERROR(
        d.check(api.cuDeviceGetCount(&count), "cuDeviceGetCount"));
    if (count <= 0)
      return Status::error("no CUDA device: cuDeviceGetCount returned 0");

    for (int ordinal = 0; ordinal < count; ++ordinal) {
      CUdevice dev = 0;
      CONDENSATE_RETURN_IF_ERROR(
          d.check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
      DeviceProperties props;
      props.ordinal = ordinal;
      char name[256] = {};
      CONDENSATE_RETURN_IF_ERROR(d.check(
          api.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName"));
      props.name = name;
      CONDENSATE_RETURN_IF_ERROR(d.check(
          api.cuDeviceTotalMem_v2(&props.totalMemoryBytes, dev),
          "cuDeviceTotalMem_v2"));

      Status status;
      auto attr = [&](CUdevice_attribute attribute) {
        int value = 0;
        if (status.ok())
          status = d.check(api.cuDeviceGetAttribute(&value, attribute, dev),
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

      driver->devices_.push_back(std::move(props));
      driver->handles_.push_back(dev);
    }
    return static_cast<const Driver *>(driver.release());
  }
};

Result<const Driver *> Driver::get() {
  // The process-wide driver cache: initialised once (thread-safe static
  // initialisation), then read-only; intentionally leaked, see Driver.h.
  static const Result<const Driver *> *const outcome =
      new Result<const Driver *>(DriverLoader::load());
  return *outcome;
}

bool Driver::available() { return get().ok(); }

Result<DeviceProperties> Driver::deviceProperties(int ordinal) const {
  if (ordinal < 0 || ordinal >= deviceCount())
    return Status::error("no CUDA device " + std::to_string(ordinal) + " (" +
                         std::to_string(deviceCount()) + " visible)");
  return devices_[static_cast<std::size_t>(ordinal)];
}

const DeviceProperties &Driver::device(int ordinal) const {
  assert(ordinal >= 0 && ordinal < deviceCount() && "bad device ordinal");
  return devices_[static_cast<std::size_t>(ordinal)];
}

int Driver::ordinalOf(CUdevice dev) const {
  for (std::size_t i = 0; i < handles_.size(); ++i)
    if (handles_[i] == dev)
      return static_cast<int>(i);
  return -1;
}

namespace {
/// Names of the codes DriverAbi.h declares, for drivers (e.g. the toolkit's
/// stub libcuda) whose cuGetErrorName does not know them.
const char *fallbackErrorName(CUresult result) {
  switch (result) {
#define CONDENSATE_CUDA_ERROR_NAME(name)                                       \
  case name:                                                                   \
    return #name;
    CONDENSATE_CUDA_ERROR_NAME(CUDA_SUCCESS)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_VALUE)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_NOT_INITIALIZED)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_DEINITIALIZED)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_STUB_LIBRARY)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_NO_DEVICE)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_DEVICE)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_IMAGE)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_CONTEXT)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_PTX)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_HANDLE)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_NOT_FOUND)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_NOT_READY)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_LAUNCH_FAILED)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_NOT_SUPPORTED)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
    CONDENSATE_CUDA_ERROR_NAME(CUDA_ERROR_UNKNOWN)
#undef CONDENSATE_CUDA_ERROR_NAME
  }
  return nullptr;
}
} // namespace

std::string Driver::describe(CUresult result) const {
  const char *name = nullptr;
  const char *text = nullptr;
  if (api_.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) {
    const char *known = fallbackErrorName(result);
    return (known ? std::string(known) : "CUresult") + " (error " +
           std::to_string(static_cast<int>(result)) +
           ", not described by this driver)";
  }
  if (api_.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    text = "no description";
  return std::string(name) + " (" + text + ")";
}

Status Driver::check(CUresult result, const char *call,
                     const std::string &detail) const {
  if (result == CUDA_SUCCESS)
    return Status::success();
  std::string message = std::string(call) + " failed: " + describe(result);
  if (!detail.empty())
    message += "; " + detail;
  if (result == CUDA_ERROR_INVALID_CONTEXT)
    message += "; is a Context current on this thread (Context::makeCurrent)?";
  return Status::error(std::move(message));
}

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

Result<Context> Context::primary(int ordinal) {
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  const Driver &d = **driver;
  if (ordinal < 0 || ordinal >= d.deviceCount())
    return Status::error("no CUDA device " + std::to_string(ordinal) + " (" +
                         std::to_string(d.deviceCount()) + " visible)");
  Context context;
  CUdevice dev = d.handle(ordinal);
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuDevicePrimaryCtxRetain(&context.context_, dev),
              "cuDevicePrimaryCtxRetain"));
  context.device_ = ordinal;
  // From here on the destructor releases the retained context.
  CONDENSATE_RETURN_IF_ERROR(context.makeCurrent());
  return context;
}

Context::Context(Context &&other) noexcept
    : context_(other.context_), device_(other.device_) {
  other.context_ = nullptr;
  other.device_ = -1;
}

Context &Context::operator=(Context &&other) noexcept {
  if (this != &other) {
    reset();
    context_ = other.context_;
    device_ = other.device_;
    other.context_ = nullptr;
    other.device_ = -1;
  }
  return *this;
}

Context::~Context() { reset(); }

void Context::reset() {
  if (!context_)
    return;
  if (const DriverApi *api = loadedApi()) {
    const Driver &d = **Driver::get();
    (void)api->cuDevicePrimaryCtxRelease_v2(d.handle(device_));
  }
  context_ = nullptr;
  device_ = -1;
}

Status Context::makeCurrent() const {
  if (!context_)
    return Status::error("Context::makeCurrent: empty context");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

Status Context::synchronize() const {
  CONDENSATE_RETURN_IF_ERROR(makeCurrent());
  const Driver &d = **Driver::get();
  return d.check(d.api().cuCtxSynchronize(), "cuCtxSynchronize");
}

Result<std::pair<std::size_t, std::size_t>> Context::memoryInfo() const {
  CONDENSATE_RETURN_IF_ERROR(makeCurrent());
  const Driver &d = **Driver::get();
  std::size_t freeBytes = 0, totalBytes = 0;
  CONDENSATE_RETURN_IF_ERROR(d.check(
      d.api().cuMemGetInfo_v2(&freeBytes, &totalBytes), "cuMemGetInfo_v2"));
  return std::make_pair(freeBytes, totalBytes);
}

const DeviceProperties &Context::properties() const {
  return (*Driver::get())->device(device_);
}

//===----------------------------------------------------------------------===//
// Stream
//===----------------------------------------------------------------------===//

Result<Stream> Stream::create() {
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  const Driver &d = **driver;
  Stream stream;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuStreamCreate(&stream.stream_, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate"));
  CUdevice dev = 0;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuCtxGetDevice(&dev), "cuCtxGetDevice"));
  stream.device_ = d.ordinalOf(dev);
  if (stream.device_ < 0)
    return Status::error("cuCtxGetDevice returned an unknown device " +
                         std::to_string(dev));
  return stream;
}

Stream Stream::borrow(CUstream raw, int device) {
  Stream stream;
  stream.stream_ = raw;
  stream.device_ = device;
  stream.borrowed_ = true;
  return stream;
}

Stream::Stream(Stream &&other) noexcept
    : stream_(other.stream_), device_(other.device_),
      borrowed_(other.borrowed_) {
  other.stream_ = nullptr;
  other.device_ = -1;
  other.borrowed_ = false;
}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    reset();
    stream_ = other.stream_;
    device_ = other.device_;
    borrowed_ = other.borrowed_;
    other.stream_ = nullptr;
    other.device_ = -1;
    other.borrowed_ = false;
  }
  return *this;
}

Stream::~Stream() { reset(); }

void Stream::reset() {
  if (stream_ && !borrowed_)
    if (const DriverApi *api = loadedApi())
      (void)api->cuStreamDestroy_v2(stream_);
  stream_ = nullptr;
  device_ = -1;
  borrowed_ = false;
}

Status Stream::synchronize() const {
  if (!valid())
    return Status::error("Stream::synchronize: empty stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

Result<bool> Stream::query() const {
  if (!valid())
    return Status::error("Stream::query: empty stream");
  const Driver &d = **Driver::get();
  CUresult r = d.api().cuStreamQuery(stream_);
  if (r == CUDA_ERROR_NOT_READY)
    return false;
  CONDENSATE_RETURN_IF_ERROR(d.check(r, "cuStreamQuery"));
  return true;
}

Status Stream::wait(const Event &event) const {
  if (!valid() || !event.valid())
    return Status::error("Stream::wait: empty stream or event");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuStreamWaitEvent(stream_, event.raw(), 0),
                 "cuStreamWaitEvent");
}

Result<bool> Stream::isCapturing() const {
  if (!valid())
    return Status::error("Stream::isCapturing: empty stream");
  const Driver &d = **Driver::get();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CONDENSATE_RETURN_IF_ERROR(d.check(
      d.api().cuStreamIsCapturing(stream_, &status), "cuStreamIsCapturing"));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

//===----------------------------------------------------------------------===//
// Event
//===----------------------------------------------------------------------===//

Result<Event> Event::create(bool enableTiming) {
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  const Driver &d = **driver;
  Event event;
  unsigned flags = enableTiming ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  CONDENSATE_RETURN_IF_ERROR(d.check(
      d.api().cuEventCreate(&event.event_, flags), "cuEventCreate"));
  return event;
}

Event::Event(Event &&other) noexcept : event_(other.event_) {
  other.event_ = nullptr;
}

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    reset();
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

Event::~Event() { reset(); }

void Event::reset() {
  if (event_)
    if (const DriverApi *api = loadedApi())
      (void)api->cuEventDestroy_v2(event_);
  event_ = nullptr;
}

Status Event::record(const Stream &stream) const {
  if (!event_ || !stream.valid())
    return Status::error("Event::record: empty event or stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuEventRecord(event_, stream.raw()), "cuEventRecord");
}

Status Event::synchronize() const {
  if (!event_)
    return Status::error("Event::synchronize: empty event");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuEventSynchronize(event_), "cuEventSynchronize");
}

Result<bool> Event::query() const {
  if (!event_)
    return Status::error("Event::query: empty event");
  const Driver &d = **Driver::get();
  CUresult r = d.api().cuEventQuery(event_);
  if (r == CUDA_ERROR_NOT_READY)
    return false;
  CONDENSATE_RETURN_IF_ERROR(d.check(r, "cuEventQuery"));
  return true;
}

Result<float> Event::elapsedMs(const Event &start, const Event &end) {
  if (!start.valid() || !end.valid())
    return Status::error("Event::elapsedMs: empty event");
  const Driver &d = **Driver::get();
  float ms = 0.0f;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuEventElapsedTime_v2(&ms, start.raw(), end.raw()),
              "cuEventElapsedTime_v2"));
  return ms;
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  DeviceBuffer buffer;
  if (bytes == 0)
    return buffer;
  const Driver &d = **driver;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuMemAlloc_v2(&buffer.address_, bytes), "cuMemAlloc_v2",
              "requested " + std::to_string(bytes) + " bytes"));
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : address_(other.address_), bytes_(other.bytes_) {
  other.address_ = 0;
  other.bytes_ = 0;
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    reset();
    address_ = other.address_;
    bytes_ = other.bytes_;
    other.address_ = 0;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() {
  if (address_)
    if (const DriverApi *api = loadedApi())
      (void)api->cuMemFree_v2(address_);
  address_ = 0;
  bytes_ = 0;
}

Status DeviceBuffer::checkRange(const char *op, std::size_t offset,
                                std::size_t bytes) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    return Status::error(std::string("DeviceBuffer::") + op + ": bytes [" +
                         std::to_string(offset) + ", " +
                         std::to_string(offset) + " + " +
                         std::to_string(bytes) + ") exceed the buffer's " +
                         std::to_string(bytes_) + " bytes");
  return Status::success();
}

Status DeviceBuffer::copyFromHost(const void *src, std::size_t bytes,
                                  std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyFromHost", offset, bytes));
  if (bytes == 0)
    return Status::success();
  const Driver &d = **Driver::get();
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuMemcpyHtoD_v2(address_ + offset, src, bytes),
              "cuMemcpyHtoD_v2"));
  // From pageable memory, cuMemcpyHtoD may return before the DMA into device
  // memory has finished; it is queued on the legacy default stream, which
  // our non-blocking streams do not wait for. Wait for it here.
  return d.check(d.api().cuStreamSynchronize(nullptr),
                 "cuStreamSynchronize (after cuMemcpyHtoD_v2)");
}

Status DeviceBuffer::copyToHost(void *dst, std::size_t bytes,
                                std::size_t offset) const {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyToHost", offset, bytes));
  if (bytes == 0)
    return Status::success();
  const Driver &d = **Driver::get();
  return d.check(d.api().cuMemcpyDtoH_v2(dst, address_ + offset, bytes),
                 "cuMemcpyDtoH_v2");
}

Status DeviceBuffer::copyFromHostAsync(const void *src, std::size_t bytes,
                                       const Stream &stream,
                                       std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyFromHostAsync", offset, bytes));
  if (bytes == 0)
    return Status::success();
  if (!stream.valid())
    return Status::error("DeviceBuffer::copyFromHostAsync: empty stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuMemcpyHtoDAsync_v2(address_ + offset, src, bytes,
                                               stream.raw()),
                 "cuMemcpyHtoDAsync_v2");
}

Status DeviceBuffer::copyToHostAsync(void *dst, std::size_t bytes,
                                     const Stream &stream,
                                     std::size_t offset) const {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyToHostAsync", offset, bytes));
  if (bytes == 0)
    return Status::success();
  if (!stream.valid())
    return Status::error("DeviceBuffer::copyToHostAsync: empty stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuMemcpyDtoHAsync_v2(dst, address_ + offset, bytes,
                                               stream.raw()),
                 "cuMemcpyDtoHAsync_v2");
}

Status DeviceBuffer::copyFromDeviceAsync(const DeviceBuffer &src,
                                         std::size_t bytes,
                                         const Stream &stream,
                                         std::size_t srcOffset,
                                         std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyFromDeviceAsync", offset, bytes));
  CONDENSATE_RETURN_IF_ERROR(
      src.checkRange("copyFromDeviceAsync (source)", srcOffset, bytes));
  if (bytes == 0)
    return Status::success();
  if (!stream.valid())
    return Status::error("DeviceBuffer::copyFromDeviceAsync: empty stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuMemcpyDtoDAsync_v2(address_ + offset,
                                               src.address_ + srcOffset, bytes,
                                               stream.raw()),
                 "cuMemcpyDtoDAsync_v2");
}

Status DeviceBuffer::memset8Async(std::uint8_t value, std::size_t bytes,
                                  const Stream &stream, std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(checkRange("memset8Async", offset, bytes));
  if (bytes == 0)
    return Status::success();
  if (!stream.valid())
    return Status::error("DeviceBuffer::memset8Async: empty stream");
  const Driver &d = **Driver::get();
  return d.check(
      d.api().cuMemsetD8Async(address_ + offset, value, bytes, stream.raw()),
      "cuMemsetD8Async");
}

Status DeviceBuffer::memsetD32Async(std::uint32_t value, std::size_t count,
                                    const Stream &stream, std::size_t offset) {
  if (count > std::numeric_limits<std::size_t>::max() / 4)
    return Status::error("DeviceBuffer::memsetD32Async: count overflows");
  CONDENSATE_RETURN_IF_ERROR(checkRange("memsetD32Async", offset, count * 4));
  if (offset % 4 != 0)
    return Status::error("DeviceBuffer::memsetD32Async: offset " +
                         std::to_string(offset) + " is not a multiple of 4");
  if (count == 0)
    return Status::success();
  if (!stream.valid())
    return Status::error("DeviceBuffer::memsetD32Async: empty stream");
  const Driver &d = **Driver::get();
  return d.check(
      d.api().cuMemsetD32Async(address_ + offset, value, count, stream.raw()),
      "cuMemsetD32Async");
}

//===----------------------------------------------------------------------===//
// Module and Function
//===----------------------------------------------------------------------===//

Result<Module> Module::loadPtx(const std::string &ptx) {
  if (ptx.empty())
    return Status::error("Module::loadPtx: empty PTX");
  if (ptx.find('\0') != std::string::npos)
    return Status::error("Module::loadPtx: PTX text contains a NUL byte");
  return load(ptx.c_str(), "PTX");
}

Result<Module> Module::loadImage(const void *image, std::size_t bytes) {
  if (!image || bytes == 0)
    return Status::error("Module::loadImage: empty image");
  return load(image, "image");
}

Result<Module> Module::load(const void *image, const char *what) {
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  const Driver &d = **driver;

  constexpr std::size_t kLogBytes = std::size_t{16} * 1024;
  // One spare NUL byte past what the JIT may write.
  std::vector<char> errorLog(kLogBytes + 1, '\0');
  std::vector<char> infoLog(kLogBytes + 1, '\0');
  CUjit_option options[] = {
      CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
      CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog.data(),
                    reinterpret_cast<void *>(static_cast<std::uintptr_t>(kLogBytes)),
                    infoLog.data(),
                    reinterpret_cast<void *>(static_cast<std::uintptr_t>(kLogBytes))};

  Module module;
  CUresult r = d.api().cuModuleLoadDataEx(
      &module.module_, image, sizeof(options) / sizeof(options[0]), options,
      values);
  if (r != CUDA_SUCCESS) {
    std::string detail = std::string("loading ") + what;
    std::string log = oneLine(errorLog.data());
    if (!log.empty())
      detail += "; JIT log: " + log;
    module.module_ = nullptr;
    return d.check(r, "cuModuleLoadDataEx", detail);
  }
  module.infoLog_ = oneLine(infoLog.data());
  return module;
}

Module::Module(Module &&other) noexcept
    : module_(other.module_), infoLog_(std::move(other.infoLog_)) {
  other.module_ = nullptr;
}

Module &Module::operator=(Module &&other) noexcept {
  if (this != &other) {
    reset();
    module_ = other.module_;
    infoLog_ = std::move(other.infoLog_);
    other.module_ = nullptr;
  }
  return *this;
}

Module::~Module() { reset(); }

void Module::reset() {
  if (module_)
    if (const DriverApi *api = loadedApi())
      (void)api->cuModuleUnload(module_);
  module_ = nullptr;
  infoLog_.clear();
}

Result<Function> Module::getFunction(const std::string &name) const {
  if (!module_)
    return Status::error("Module::getFunction: empty module");
  const Driver &d = **Driver::get();
  CUfunction function = nullptr;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuModuleGetFunction(&function, module_, name.c_str()),
              "cuModuleGetFunction", "kernel '" + name + "'"));
  return Function(function, name);
}

Result<DeviceGlobal> Module::getGlobal(const std::string &name) const {
  if (!module_)
    return Status::error("Module::getGlobal: empty module");
  const Driver &d = **Driver::get();
  DeviceGlobal global;
  CONDENSATE_RETURN_IF_ERROR(d.check(
      d.api().cuModuleGetGlobal_v2(&global.address, &global.bytes, module_,
                                   name.c_str()),
      "cuModuleGetGlobal_v2", "global '" + name + "'"));
  return global;
}

Status Function::setMaxDynamicSharedMemory(int bytes) const {
  if (!function_)
    return Status::error("Function::setMaxDynamicSharedMemory: empty function");
  const Driver &d = **Driver::get();
  return d.check(
      d.api().cuFuncSetAttribute(
          function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      "cuFuncSetAttribute",
      "kernel '" + name_ + "', max dynamic shared memory " +
          std::to_string(bytes) + " bytes");
}

Result<int> Function::attribute(CUfunction_attribute attribute) const {
  if (!function_)
    return Status::error("Function::attribute: empty function");
  const Driver &d = **Driver::get();
  int value = 0;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuFuncGetAttribute(&value, attribute, function_),
              "cuFuncGetAttribute",
              "kernel '" + name_ + "', attribute " +
                  std::to_string(static_cast<int>(attribute))));
  return value;
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

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
    return Status::error("block " + dimString(block) +
                         " exceeds the maximum " + dimString(limits.maxBlock));
  unsigned long long threads = static_cast<unsigned long long>(block.x) *
                               block.y * block.z;
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

namespace {
/// launch() without recording; allocates only on failure.
Status launchImpl(const Function &function, Dim3 grid, Dim3 block,
                  unsigned sharedBytes, const Stream &stream,
                  void **kernelParams) {
  if (!function.valid())
    return Status::error("launch: empty function");
  auto what = [&] { return "launch of kernel '" + function.name() + "'"; };
  if (!stream.valid())
    return Status::error(what() + ": empty stream");
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status().withContext(what());
  const Driver &d = **driver;
  Status valid = validateLaunch(grid, block, sharedBytes,
                                d.device(stream.device()).limits);
  if (!valid.ok())
    return valid.withContext(what());
  CUresult r = d.api().cuLaunchKernel(
      function.raw(), grid.x, grid.y, grid.z, block.x, block.y, block.z,
      sharedBytes, stream.raw(), kernelParams, nullptr);
  if (r == CUDA_SUCCESS)
    return Status::success();
  return d.check(r, "cuLaunchKernel",
                 "kernel '" + function.name() + "', grid " + dimString(grid) +
                     ", block " + dimString(block) + ", " +
                     std::to_string(sharedBytes) + " bytes dynamic shared");
}
} // namespace

Status launch(const Function &function, Dim3 grid, Dim3 block,
              unsigned sharedBytes, const Stream &stream,
              void **kernelParams) {
  Status status =
      launchImpl(function, grid, block, sharedBytes, stream, kernelParams);
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
  return reinterpret_cast<const unsigned char *>(storage_.data()) +
         offsets_[i];
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

Graph::Graph(Graph &&other) noexcept : graph_(other.graph_) {
  other.graph_ = nullptr;
}

Graph &Graph::operator=(Graph &&other) noexcept {
  if (this != &other) {
    reset();
    graph_ = other.graph_;
    other.graph_ = nullptr;
  }
  return *this;
}

Graph::~Graph() { reset(); }

void Graph::reset() {
  if (graph_)
    if (const DriverApi *api = loadedApi())
      (void)api->cuGraphDestroy(graph_);
  graph_ = nullptr;
}

Result<GraphExec> Graph::instantiate() const {
  if (!graph_)
    return Status::error("Graph::instantiate: empty graph");
  const Driver &d = **Driver::get();
  CUgraphExec exec = nullptr;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuGraphInstantiateWithFlags(&exec, graph_, 0),
              "cuGraphInstantiateWithFlags"));
  return GraphExec(exec);
}

GraphExec::GraphExec(GraphExec &&other) noexcept : exec_(other.exec_) {
  other.exec_ = nullptr;
}

GraphExec &GraphExec::operator=(GraphExec &&other) noexcept {
  if (this != &other) {
    reset();
    exec_ = other.exec_;
    other.exec_ = nullptr;
  }
  return *this;
}

GraphExec::~GraphExec() { reset(); }

void GraphExec::reset() {
  if (exec_)
    if (const DriverApi *api = loadedApi())
      (void)api->cuGraphExecDestroy(exec_);
  exec_ = nullptr;
}

Status GraphExec::launch(const Stream &stream) const {
  if (!exec_ || !stream.valid())
    return Status::error("GraphExec::launch: empty graph or stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuGraphLaunch(exec_, stream.raw()), "cuGraphLaunch");
}

Status GraphExec::upload(const Stream &stream) const {
  if (!exec_ || !stream.valid())
    return Status::error("GraphExec::upload: empty graph or stream");
  const Driver &d = **Driver::get();
  return d.check(d.api().cuGraphUpload(exec_, stream.raw()), "cuGraphUpload");
}

namespace {
const char *updateResultName(CUgraphExecUpdateResult result) {
  switch (result) {
  case CU_GRAPH_EXEC_UPDATE_SUCCESS:
    return "CU_GRAPH_EXEC_UPDATE_SUCCESS";
  case CU_GRAPH_EXEC_UPDATE_ERROR:
    return "CU_GRAPH_EXEC_UPDATE_ERROR";
  case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED";
  case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED";
  case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED";
  case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE";
  case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
    return "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED";
  }
  return "unknown CUgraphExecUpdateResult";
}
} // namespace

Status GraphExec::update(const Graph &graph) {
  if (!exec_ || !graph.valid())
    return Status::error("GraphExec::update: empty graph");
  const Driver &d = **Driver::get();
  if (!d.api().cuGraphExecUpdate_v2)
    return Status::error("GraphExec::update: the driver lacks "
                         "cuGraphExecUpdate_v2 (CUDA 12.0+)");
  CUgraphExecUpdateResultInfo info = {};
  CUresult r = d.api().cuGraphExecUpdate_v2(exec_, graph.raw(), &info);
  return d.check(r, "cuGraphExecUpdate_v2",
                 std::string("update result ") + updateResultName(info.result));
}

Result<StreamCapture> StreamCapture::begin(const Stream &stream,
                                           CaptureMode mode) {
  if (!stream.valid())
    return Status::error("StreamCapture::begin: empty stream");
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  const Driver &d = **driver;
  CUstreamCaptureMode cuMode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  switch (mode) {
  case CaptureMode::Global:
    cuMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    break;
  case CaptureMode::ThreadLocal:
    cuMode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    break;
  case CaptureMode::Relaxed:
    cuMode = CU_STREAM_CAPTURE_MODE_RELAXED;
    break;
  }
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuStreamBeginCapture_v2(stream.raw(), cuMode),
              "cuStreamBeginCapture_v2"));
  StreamCapture capture;
  capture.stream_ = stream.raw();
  return capture;
}

StreamCapture::StreamCapture(StreamCapture &&other) noexcept
    : stream_(other.stream_) {
  other.stream_ = nullptr;
}

StreamCapture &StreamCapture::operator=(StreamCapture &&other) noexcept {
  if (this != &other) {
    abandon();
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}

StreamCapture::~StreamCapture() { abandon(); }

void StreamCapture::abandon() {
  if (stream_)
    if (const DriverApi *api = loadedApi()) {
      CUgraph graph = nullptr;
      (void)api->cuStreamEndCapture(stream_, &graph);
      if (graph)
        (void)api->cuGraphDestroy(graph);
    }
  stream_ = nullptr;
}

Result<Graph> StreamCapture::end() {
  if (!stream_)
    return Status::error("StreamCapture::end: not capturing");
  const Driver &d = **Driver::get();
  CUgraph raw = nullptr;
  CUresult r = d.api().cuStreamEndCapture(stream_, &raw);
  stream_ = nullptr;
  Graph graph(raw); // owns (and on failure destroys) whatever was returned
  CONDENSATE_RETURN_IF_ERROR(d.check(r, "cuStreamEndCapture"));
  if (!graph.valid())
    return Status::error("cuStreamEndCapture returned no graph");
  return graph;
}

} // namespace cuda
} // namespace condensate
