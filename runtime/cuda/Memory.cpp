//===- Memory.cpp - Device buffers: allocation, copies and memset ---------===//
//
// Implements DeviceBuffer over cuMemAlloc/cuMemFree, the synchronous and
// stream-ordered copies, and memset, each bounds-checked against the buffer.
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

#include <limits>

namespace condensate {
namespace cuda {

using namespace abi;
using detail::LoadedDriver;

namespace {

/// An error unless bytes [offset, offset + bytes) lie in a buffer of `size`.
Status checkRange(const char *op, std::size_t offset, std::size_t bytes,
                  std::size_t size) {
  if (offset > size || bytes > size - offset)
    return Status::error(std::string("DeviceBuffer::") + op + ": bytes [" +
                         std::to_string(offset) + ", " +
                         std::to_string(offset) + " + " +
                         std::to_string(bytes) + ") exceed the buffer's " +
                         std::to_string(size) + " bytes");
  return Status::success();
}

/// checkRange, and for a stream-ordered operation with something to do
/// (bytes > 0), that `stream` is not empty.
Status checkAsync(const char *op, std::size_t offset, std::size_t bytes,
                  std::size_t size, const Stream &stream) {
  CONDENSATE_RETURN_IF_ERROR(checkRange(op, offset, bytes, size));
  if (bytes != 0 && !stream.valid())
    return Status::error(std::string("DeviceBuffer::") + op + ": empty stream");
  return Status::success();
}

} // namespace

void detail::freeAllocation(Allocation raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded())
    (void)d->api().cuMemFree_v2(raw.address);
}

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status();
  DeviceBuffer buffer;
  if (bytes == 0)
    return buffer;
  const LoadedDriver &d = **driver;
  CUdeviceptr address = 0;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuMemAlloc_v2(&address, bytes), "cuMemAlloc_v2",
              "requested " + std::to_string(bytes) + " bytes"));
  buffer.handle_.reset({address, bytes});
  return buffer;
}

Status DeviceBuffer::copyFromHost(const void *src, std::size_t bytes,
                                  std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyFromHost", offset, bytes, size()));
  if (bytes == 0)
    return Status::success();
  const LoadedDriver &d = LoadedDriver::loaded();
  CONDENSATE_RETURN_IF_ERROR(
      CONDENSATE_CU(d, cuMemcpyHtoD_v2, address() + offset, src, bytes));
  // From pageable memory, cuMemcpyHtoD may return before the DMA into device
  // memory has finished; it is queued on the legacy default stream, which
  // our non-blocking streams do not wait for. Wait for it here.
  return d.check(d.api().cuStreamSynchronize(nullptr),
                 "cuStreamSynchronize (after cuMemcpyHtoD_v2)");
}

Status DeviceBuffer::copyToHost(void *dst, std::size_t bytes,
                                std::size_t offset) const {
  CONDENSATE_RETURN_IF_ERROR(checkRange("copyToHost", offset, bytes, size()));
  if (bytes == 0)
    return Status::success();
  return CONDENSATE_CU(LoadedDriver::loaded(), cuMemcpyDtoH_v2, dst,
                       address() + offset, bytes);
}

Status DeviceBuffer::copyFromHostAsync(const void *src, std::size_t bytes,
                                       const Stream &stream,
                                       std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(
      checkAsync("copyFromHostAsync", offset, bytes, size(), stream));
  if (bytes == 0)
    return Status::success();
  return CONDENSATE_CU(LoadedDriver::loaded(), cuMemcpyHtoDAsync_v2,
                       address() + offset, src, bytes, stream.raw());
}

Status DeviceBuffer::copyToHostAsync(void *dst, std::size_t bytes,
                                     const Stream &stream,
                                     std::size_t offset) const {
  CONDENSATE_RETURN_IF_ERROR(
      checkAsync("copyToHostAsync", offset, bytes, size(), stream));
  if (bytes == 0)
    return Status::success();
  return CONDENSATE_CU(LoadedDriver::loaded(), cuMemcpyDtoHAsync_v2, dst,
                       address() + offset, bytes, stream.raw());
}

Status DeviceBuffer::copyFromDeviceAsync(const DeviceBuffer &src,
                                         std::size_t bytes,
                                         const Stream &stream,
                                         std::size_t srcOffset,
                                         std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(
      checkRange("copyFromDeviceAsync", offset, bytes, size()));
  CONDENSATE_RETURN_IF_ERROR(
      checkRange("copyFromDeviceAsync (source)", srcOffset, bytes, src.size()));
  CONDENSATE_RETURN_IF_ERROR(
      checkAsync("copyFromDeviceAsync", offset, bytes, size(), stream));
  if (bytes == 0)
    return Status::success();
  return CONDENSATE_CU(LoadedDriver::loaded(), cuMemcpyDtoDAsync_v2,
                       address() + offset, src.address() + srcOffset, bytes,
                       stream.raw());
}

Status DeviceBuffer::memset8Async(std::uint8_t value, std::size_t bytes,
                                  const Stream &stream, std::size_t offset) {
  CONDENSATE_RETURN_IF_ERROR(
      checkAsync("memset8Async", offset, bytes, size(), stream));
  if (bytes == 0)
    return Status::success();
  return CONDENSATE_CU(LoadedDriver::loaded(), cuMemsetD8Async,
                       address() + offset, value, bytes, stream.raw());
}

Status DeviceBuffer::memsetD32Async(std::uint32_t value, std::size_t count,
                                    const Stream &stream, std::size_t offset) {
  if (count > std::numeric_limits<std::size_t>::max() / 4)
    return Status::error("DeviceBuffer::memsetD32Async: count overflows");
  CONDENSATE_RETURN_IF_ERROR(
      checkRange("memsetD32Async", offset, count * 4, size()));
  if (offset % 4 != 0)
    return Status::error("DeviceBuffer::memsetD32Async: offset " +
                         std::to_string(offset) + " is not a multiple of 4");
  CONDENSATE_RETURN_IF_ERROR(
      checkAsync("memsetD32Async", offset, count * 4, size(), stream));
  if (count == 0)
    return Status::success();
  return CONDENSATE_CU(LoadedDriver::loaded(), cuMemsetD32Async,
                       address() + offset, value, count, stream.raw());
}

} // namespace cuda
} // namespace condensate
