//===- Status.h - recoverable errors as values -------------------*- C++ -*-===//
//
// Errors are values: a Status is ok or holds one located, one-line message;
// Result<T> is a T or such a message. Plain C++, used from the ABI layer up
// through the runtime (whose public headers stay free of LLVM and MLIR, so
// engines can link it without either).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_SUPPORT_STATUS_H
#define CONDENSATE_SUPPORT_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace condensate {

/// Either success or a one-line error message.
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }
  /// Prefixes the message with `context: ` (used to add file or call names).
  Status withContext(const std::string &context) const {
    if (ok())
      return *this;
    return error(context + ": " + *message_);
  }

private:
  std::optional<std::string> message_;
};

/// A value of type T or an error message.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "Result constructed from a success status");
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status &status() const { return status_; }
  const std::string &message() const { return status_.message(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace condensate

/// Returns early from the enclosing function if `expr` is an error Status.
#define CONDENSATE_RETURN_IF_ERROR(expr)                                       \
  do {                                                                         \
    ::condensate::Status _st = (expr);                                         \
    if (!_st.ok())                                                             \
      return _st;                                                              \
  } while (0)

#endif // CONDENSATE_SUPPORT_STATUS_H
