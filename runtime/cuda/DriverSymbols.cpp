//===- DriverSymbols.cpp - Loading libcuda and naming its errors ----------===//
//
// Opens libcuda.so.1 with dlopen, resolves every entry point of the table in
// DriverAbi.h, initialises the driver, and turns result codes into one-line
// messages. The loaded driver is the layer's process-wide cache.
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

#include <dlfcn.h>

#include <cassert>
#include <cstring>
#include <memory>

namespace condensate {
namespace cuda {
namespace detail {

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

/// Names of the codes DriverAbi.h declares, for drivers (e.g. the toolkit's
/// stub libcuda) whose cuGetErrorName does not know them.
const char *fallbackErrorName(CUresult result) {
  switch (result) { CONDENSATE_CUDA_RESULTS(CONDENSATE_CUDA_NAME_CASE) }
  return nullptr;
}

} // namespace

Status LoadedDriver::load() {
  library_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    // dlerror() normally reads "libcuda.so.1: cannot open shared object
    // file: ..."; make sure the library's name is there in any case.
    const char *why = dlerror();
    std::string reason = why ? why : "unknown dlopen error";
    if (reason.find("libcuda.so.1") == std::string::npos)
      reason = "dlopen(libcuda.so.1) failed: " + reason;
    return Status::error("no CUDA driver: " + reason);
  }

  std::string missing;
  auto resolve = [&](const char *name, bool required) -> void * {
    void *symbol = dlsym(library_, name);
    for (const Fallback &fallback : kFallbacks)
      if (!symbol && std::strcmp(fallback.name, name) == 0)
        symbol = dlsym(library_, fallback.older);
    if (!symbol && required)
      missing += missing.empty() ? name : std::string(", ") + name;
    return symbol;
  };
#define CONDENSATE_CUDA_RESOLVE(name, ret, params, required)                   \
  api_.name = reinterpret_cast<PFN_##name>(resolve(#name, required));
  CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(CONDENSATE_CUDA_RESOLVE)
#undef CONDENSATE_CUDA_RESOLVE
  if (!missing.empty()) {
    // Keep the library mapped: another component may be using it.
    return Status::error("libcuda.so.1 lacks driver entry points (driver "
                         "older than CUDA 12?): " +
                         missing);
  }

  CUresult init = api_.cuInit(0);
  CONDENSATE_RETURN_IF_ERROR(
      check(init, "cuInit",
            init == CUDA_ERROR_STUB_LIBRARY
                ? "the libcuda.so.1 found is the toolkit's stub, not a driver"
                : std::string()));
  CONDENSATE_RETURN_IF_ERROR(
      CONDENSATE_CU(*this, cuDriverGetVersion, &driverVersion_));
  return queryDevices();
}

Result<const LoadedDriver *> LoadedDriver::get() {
  // The process-wide driver cache: initialised once (thread-safe static
  // initialisation), then read-only; intentionally leaked, see Driver.h.
  static const Result<const LoadedDriver *> *const outcome = [] {
    std::unique_ptr<LoadedDriver> driver(new LoadedDriver());
    Status status = driver->load();
    if (!status.ok())
      return new Result<const LoadedDriver *>(std::move(status));
    return new Result<const LoadedDriver *>(driver.release());
  }();
  return *outcome;
}

const LoadedDriver *LoadedDriver::ifLoaded() {
  Result<const LoadedDriver *> driver = get();
  return driver ? *driver : nullptr;
}

const LoadedDriver &LoadedDriver::loaded() {
  const LoadedDriver *driver = ifLoaded();
  assert(driver && "a driver object exists only once the driver has loaded");
  return *driver;
}

std::string LoadedDriver::describe(CUresult result) const {
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

Status LoadedDriver::check(CUresult result, const char *call,
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

} // namespace detail

Result<const Driver *> Driver::get() {
  Result<const detail::LoadedDriver *> driver = detail::LoadedDriver::get();
  if (!driver)
    return driver.status();
  return static_cast<const Driver *>(*driver);
}

bool Driver::available() { return get().ok(); }

} // namespace cuda
} // namespace condensate
