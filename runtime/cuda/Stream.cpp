//===- Stream.cpp - Streams and events ------------------------------------===//
//
// Implements Stream (owned non-blocking streams, or borrowed ones that are
// never destroyed) and Event (recording, waiting, timing).
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

namespace condensate {
namespace cuda {

using namespace abi;
using detail::LoadedDriver;

namespace {
/// True if `r` is CUDA_SUCCESS, false if CUDA_ERROR_NOT_READY (work is
/// pending), else the error of `call`.
Result<bool> readiness(const LoadedDriver &d, CUresult r, const char *call) {
  if (r == CUDA_ERROR_NOT_READY)
    return false;
  CONDENSATE_RETURN_IF_ERROR(d.check(r, call));
  return true;
}
} // namespace

//===----------------------------------------------------------------------===//
// Stream
//===----------------------------------------------------------------------===//

void detail::destroyStream(StreamRef raw) noexcept {
  if (raw.stream && !raw.borrowed)
    if (const LoadedDriver *d = LoadedDriver::ifLoaded())
      (void)d->api().cuStreamDestroy_v2(raw.stream);
}

Result<Stream> Stream::create() {
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status();
  const LoadedDriver &d = **driver;
  Stream stream;
  detail::StreamRef *created = stream.handle_.out();
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(d, cuStreamCreate, &created->stream,
                                           CU_STREAM_NON_BLOCKING));
  CUdevice dev = 0;
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(d, cuCtxGetDevice, &dev));
  created->device = d.ordinalOf(dev);
  if (created->device < 0)
    return Status::error("cuCtxGetDevice returned an unknown device " +
                         std::to_string(dev));
  return stream;
}

Stream Stream::borrow(StreamHandle raw, int device) {
  Stream stream;
  stream.handle_.reset({raw, device, /*borrowed=*/true});
  return stream;
}

Status Stream::synchronize() const {
  if (!valid())
    return Status::error("Stream::synchronize: empty stream");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuStreamSynchronize, raw());
}

Result<bool> Stream::query() const {
  if (!valid())
    return Status::error("Stream::query: empty stream");
  const LoadedDriver &d = LoadedDriver::loaded();
  return readiness(d, d.api().cuStreamQuery(raw()), "cuStreamQuery");
}

Status Stream::wait(const Event &event) const {
  if (!valid() || !event.valid())
    return Status::error("Stream::wait: empty stream or event");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuStreamWaitEvent, raw(),
                       event.raw(), 0);
}

Result<bool> Stream::isCapturing() const {
  if (!valid())
    return Status::error("Stream::isCapturing: empty stream");
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(
      LoadedDriver::loaded(), cuStreamIsCapturing, raw(), &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

//===----------------------------------------------------------------------===//
// Event
//===----------------------------------------------------------------------===//

void detail::destroyEvent(EventHandle raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded())
    (void)d->api().cuEventDestroy_v2(raw);
}

Result<Event> Event::create(bool enableTiming) {
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status();
  Event event;
  unsigned flags = enableTiming ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  CONDENSATE_RETURN_IF_ERROR(
      CONDENSATE_CU(**driver, cuEventCreate, event.handle_.out(), flags));
  return event;
}

Status Event::record(const Stream &stream) const {
  if (!valid() || !stream.valid())
    return Status::error("Event::record: empty event or stream");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuEventRecord, raw(),
                       stream.raw());
}

Status Event::synchronize() const {
  if (!valid())
    return Status::error("Event::synchronize: empty event");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuEventSynchronize, raw());
}

Result<bool> Event::query() const {
  if (!valid())
    return Status::error("Event::query: empty event");
  const LoadedDriver &d = LoadedDriver::loaded();
  return readiness(d, d.api().cuEventQuery(raw()), "cuEventQuery");
}

Result<float> Event::elapsedMs(const Event &start, const Event &end) {
  if (!start.valid() || !end.valid())
    return Status::error("Event::elapsedMs: empty event");
  float ms = 0.0f;
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(LoadedDriver::loaded(),
                                           cuEventElapsedTime_v2, &ms,
                                           start.raw(), end.raw()));
  return ms;
}

} // namespace cuda
} // namespace condensate
