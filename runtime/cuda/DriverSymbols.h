//===- DriverSymbols.h - The loaded libcuda, shared inside runtime/cuda/ --===//
//
// Private to the CUDA layer: the loaded driver with its entry points (the
// one table in DriverAbi.h) and the CUdevice of each ordinal, and the one way
// every driver call is checked (CONDENSATE_CU). Driver.h shows only the
// public face of LoadedDriver.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_CUDA_DRIVERSYMBOLS_H
#define CONDENSATE_RUNTIME_CUDA_DRIVERSYMBOLS_H

#include "DriverAbi.h"

#include "condensate/Cuda/Driver.h"

#include <string>
#include <vector>

namespace condensate {
namespace cuda {

namespace detail {

/// The process-wide driver (see Driver): Driver::get() hands out this object.
class LoadedDriver final : public Driver {
public:
  /// Loads the driver on the first call (thread-safe), then returns the
  /// cached outcome.
  static Result<const LoadedDriver *> get();
  /// The driver if it loaded, else null: for destructors, which cannot
  /// report errors.
  static const LoadedDriver *ifLoaded();
  /// The driver, for objects that exist only once it has loaded (a
  /// non-empty handle).
  static const LoadedDriver &loaded();

  const abi::DriverApi &api() const { return api_; }
  /// The CUdevice for a valid ordinal, and back (-1 if unknown).
  abi::CUdevice handle(int ordinal) const;
  int ordinalOf(abi::CUdevice dev) const;

  /// Status for a driver result: success, or
  /// "<call> failed: NAME (text)[; <detail>]".
  Status check(abi::CUresult result, const char *call,
               const std::string &detail = std::string()) const;
  /// "CUDA_ERROR_NAME (text)" for a result code.
  std::string describe(abi::CUresult result) const;

private:
  LoadedDriver() = default;
  /// Opens the library, resolves the entry points and calls cuInit.
  Status load();
  /// Reads every device's properties (Device.cpp).
  Status queryDevices();

  void *library_ = nullptr;
  abi::DriverApi api_;
  std::vector<abi::CUdevice> handles_;
};

} // namespace detail
} // namespace cuda
} // namespace condensate

/// Calls entry point `fn` of the LoadedDriver `driver` with the remaining
/// arguments; the Status names `fn` if it fails:
///   return CONDENSATE_CU(d, cuStreamSynchronize, stream);
#define CONDENSATE_CU(driver, fn, ...)                                         \
  (driver).check((driver).api().fn(__VA_ARGS__), #fn)

#endif // CONDENSATE_RUNTIME_CUDA_DRIVERSYMBOLS_H
