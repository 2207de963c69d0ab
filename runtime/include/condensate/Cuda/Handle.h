//===- Handle.h - The one RAII owner of every CUDA driver object ----------===//
//
// Handle<Raw, destroy> owns one driver object: movable, not copyable, and it
// calls destroy(raw) when reset, assigned over or destroyed. Raw is what the
// driver hands out (a pointer to an opaque struct, a device address, or a
// small struct of such), trivially copyable and comparable; the
// value-initialised Raw{} is the empty handle, which is never destroyed, and
// a moved-from handle is empty. Destruction cannot report errors, so
// destroy() ignores the driver's result:
//
//   void destroyEvent(EventHandle raw) noexcept; // defined in runtime/cuda/
//   Handle<EventHandle, destroyEvent> event;
//
// Every class of Driver.h and Blas.h that owns a driver object holds one
// Handle and so needs no move or destructor code of its own.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CUDA_HANDLE_H
#define CONDENSATE_CUDA_HANDLE_H

#include <type_traits>

namespace condensate {
namespace cuda {

template <typename Raw, void (*Destroy)(Raw) noexcept> class Handle {
  static_assert(std::is_trivially_copyable<Raw>::value,
                "a raw driver handle is copied bytewise");

public:
  Handle() = default;
  explicit Handle(Raw raw) noexcept : raw_(raw) {}
  Handle(Handle &&other) noexcept : raw_(other.release()) {}
  Handle &operator=(Handle &&other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() { reset(); }

  const Raw &get() const { return raw_; }
  bool empty() const { return raw_ == Raw{}; }
  /// Where a creating driver call writes the new object, so that the handle
  /// owns it (and destroys it on an early error return) from then on.
  Raw *out() { return &raw_; }

  /// Gives up ownership without destroying.
  Raw release() noexcept {
    Raw raw = raw_;
    raw_ = Raw{};
    return raw;
  }
  /// Destroys the object held, if any, and holds `raw` instead.
  void reset(Raw raw = Raw{}) noexcept {
    Raw old = raw_;
    raw_ = raw;
    if (!(old == Raw{}))
      Destroy(old);
  }

private:
  Raw raw_{};
};

} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_CUDA_HANDLE_H
